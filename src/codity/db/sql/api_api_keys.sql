-- Project API keys: `cdy_` + 32 random bytes, only the SHA-256 stored, shown once. A key acts
-- for the person who created it, never with more than that person may do right now.

-- name: api_api_keys_use
-- Authentication: one statement finds a live key (not revoked, not expired, its creator still
-- an active member of the project's organisation) and records its use. The effective role is
-- the lower of the key's role and its creator's current role (member_role is declared owner,
-- admin, member, viewer: the greater value is the lesser role). last_used_at is refreshed at
-- most once a minute: a key enqueueing all day should not rewrite its row on every request.
-- Parameters: :key_hash bytea.
WITH live AS (
    SELECT k.id, k.project_id, greatest(k.role, m.role) AS role, p.org_id
      FROM api_keys k
      JOIN projects p ON p.id = k.project_id
      JOIN memberships m ON m.org_id = p.org_id AND m.user_id = k.created_by
      JOIN users u ON u.id = k.created_by AND u.is_active
     WHERE k.key_hash = :key_hash::bytea
       AND k.revoked_at IS NULL
       AND k.expires_at > now()
), touched AS (
    UPDATE api_keys SET last_used_at = now()
     WHERE id = (SELECT id FROM live)
       AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
)
SELECT id, project_id, role, org_id FROM live;

-- name: api_api_keys_list
-- Ordered by id (the keyset), with who created each key. Never the hash.
-- Parameters: :project_id uuid, :limit int, plus those of the fragments.
SELECT k.id, k.name, k.prefix, k.role, k.created_at, k.last_used_at, k.expires_at,
       k.revoked_at, u.id AS creator_id, u.email AS creator_email,
       u.display_name AS creator_name
FROM api_keys k LEFT JOIN users u ON u.id = k.created_by
WHERE k.project_id = :project_id::uuid
/*fragments*/
ORDER BY k.id
LIMIT :limit::int;

-- name: api_api_keys_after
AND k.id > :after_id::uuid;

-- name: api_api_keys_insert
-- Every key expires (API_KEY_TTL_DAYS unless the request asks for another lifetime).
-- Parameters: :project_id uuid, :name text, :prefix text, :key_hash bytea, :role member_role,
-- :created_by uuid, :expires_in_days int.
WITH k AS (
    INSERT INTO api_keys (project_id, name, prefix, key_hash, role, created_by, expires_at)
    VALUES (:project_id::uuid, :name::text, :prefix::text, :key_hash::bytea, :role::member_role,
            :created_by::uuid, now() + make_interval(days => :expires_in_days::int))
    RETURNING id, name, prefix, role, created_at, last_used_at, expires_at, revoked_at, created_by
)
SELECT k.id, k.name, k.prefix, k.role, k.created_at, k.last_used_at, k.expires_at, k.revoked_at,
       u.id AS creator_id, u.email AS creator_email, u.display_name AS creator_name
FROM k LEFT JOIN users u ON u.id = k.created_by;

-- name: api_api_keys_revoke
-- Idempotent: revoking a revoked key keeps its first revocation time.
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE project_id = :project_id::uuid AND id = :key_id::uuid
RETURNING id;

-- name: api_api_keys_revoke_of_creator
-- Someone leaves the organisation: the keys they created in its projects are revoked (they
-- already stopped working with the membership; this makes it visible and permanent).
-- Parameters: :org_id uuid, :user_id uuid.
UPDATE api_keys k SET revoked_at = now()
FROM projects p
WHERE p.id = k.project_id AND p.org_id = :org_id::uuid AND k.created_by = :user_id::uuid
  AND k.revoked_at IS NULL;
