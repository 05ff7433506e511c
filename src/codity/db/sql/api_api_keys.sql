-- Project API keys: `cdy_` + 32 random bytes, only the SHA-256 stored, shown once.

-- name: api_api_keys_use
-- Authentication: one statement finds a live key (not revoked, not expired) and records its
-- use. last_used_at is refreshed at most once a minute: a key enqueueing all day should not
-- rewrite its row on every request. Parameters: :key_hash bytea.
WITH live AS (
    SELECT k.id, k.project_id, k.role, p.org_id, k.last_used_at
      FROM api_keys k JOIN projects p ON p.id = k.project_id
     WHERE k.key_hash = :key_hash::bytea
       AND k.revoked_at IS NULL
       AND (k.expires_at IS NULL OR k.expires_at > now())
), touched AS (
    UPDATE api_keys SET last_used_at = now()
     WHERE id = (SELECT id FROM live)
       AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
)
SELECT id, project_id, role, org_id FROM live;

-- name: api_api_keys_list
-- Ordered by id (the keyset). Never the hash.
-- Parameters: :project_id uuid, :limit int, plus those of the fragments.
SELECT id, name, prefix, role, created_at, last_used_at, expires_at, revoked_at
FROM api_keys
WHERE project_id = :project_id::uuid
/*fragments*/
ORDER BY id
LIMIT :limit::int;

-- name: api_api_keys_after
AND id > :after_id::uuid;

-- name: api_api_keys_insert
-- Parameters: :project_id uuid, :name text, :prefix text, :key_hash bytea, :role member_role,
-- :created_by uuid, :expires_in_days int (NULL: never expires).
INSERT INTO api_keys (project_id, name, prefix, key_hash, role, created_by, expires_at)
VALUES (:project_id::uuid, :name::text, :prefix::text, :key_hash::bytea, :role::member_role,
        :created_by::uuid,
        CASE WHEN :expires_in_days::int IS NULL THEN NULL
             ELSE now() + make_interval(days => :expires_in_days::int) END)
RETURNING id, name, prefix, role, created_at, last_used_at, expires_at, revoked_at;

-- name: api_api_keys_revoke
-- Idempotent: revoking a revoked key keeps its first revocation time.
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE project_id = :project_id::uuid AND id = :key_id::uuid
RETURNING id;
