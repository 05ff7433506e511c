-- Refresh tokens: opaque, stored as SHA-256, grouped in families (one family per sign-in).

-- name: api_sessions_insert
-- Parameters: :user_id uuid, :family_id uuid, :token_hash bytea, :ttl_s int,
-- :user_agent text, :ip inet.
INSERT INTO refresh_tokens (user_id, family_id, token_hash, expires_at, user_agent, ip)
VALUES (:user_id::uuid, :family_id::uuid, :token_hash::bytea,
        now() + make_interval(secs => :ttl_s::int), :user_agent::text, :ip::inet);

-- name: api_sessions_lock
-- A refresh: the presented token's row, locked so two refreshes of one token serialise.
-- Parameters: :token_hash bytea.
SELECT id, user_id, family_id, expires_at, rotated_at, revoked_at
FROM refresh_tokens WHERE token_hash = :token_hash::bytea
FOR UPDATE;

-- name: api_sessions_rotate
-- The presented token was exchanged: presenting it again means it leaked.
UPDATE refresh_tokens SET rotated_at = now() WHERE id = :id::uuid;

-- name: api_sessions_revoke_family
UPDATE refresh_tokens SET revoked_at = now()
WHERE family_id = :family_id::uuid AND revoked_at IS NULL;

-- name: api_sessions_revoke_family_of_token
-- Logout: the presented token's whole family. An unknown token changes nothing.
UPDATE refresh_tokens SET revoked_at = now()
WHERE family_id = (SELECT family_id FROM refresh_tokens WHERE token_hash = :token_hash::bytea)
  AND revoked_at IS NULL;
