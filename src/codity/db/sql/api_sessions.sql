-- Refresh tokens: opaque, carried in an httpOnly cookie, stored as HMAC-SHA256 under
-- JWT_REFRESH_SECRET, grouped in families (one family per sign-in).

-- name: api_sessions_insert
-- Parameters: :user_id uuid, :family_id uuid, :token_hash bytea, :ttl_s int,
-- :user_agent text, :ip inet.
INSERT INTO refresh_tokens (user_id, family_id, token_hash, expires_at, user_agent, ip)
VALUES (:user_id::uuid, :family_id::uuid, :token_hash::bytea,
        now() + make_interval(secs => :ttl_s::int), :user_agent::text, :ip::inet);

-- name: api_sessions_lock
-- A refresh: the presented token's row, locked so two refreshes of one token serialise, with
-- whether its account may still sign in (a deactivated account cannot refresh).
-- Parameters: :token_hash bytea.
SELECT r.id, r.user_id, r.family_id, r.expires_at, r.rotated_at, r.revoked_at,
       u.is_active AND u.email_verified_at IS NOT NULL AS account_ok
FROM refresh_tokens r JOIN users u ON u.id = r.user_id
WHERE r.token_hash = :token_hash::bytea
FOR UPDATE OF r;

-- name: api_sessions_family_of
-- Logout: the family of the presented token (NULL when unknown).
SELECT family_id FROM refresh_tokens WHERE token_hash = :token_hash::bytea;

-- name: api_sessions_rotate
-- The presented token was exchanged: presenting it again means it leaked.
UPDATE refresh_tokens SET rotated_at = now() WHERE id = :id::uuid;

-- name: api_sessions_revoke_family
UPDATE refresh_tokens SET revoked_at = now()
WHERE family_id = :family_id::uuid AND revoked_at IS NULL;

-- name: api_sessions_revoke_all
-- Password change and "sign out everywhere": every family of the account
-- (ix_refresh_tokens_user_id).
UPDATE refresh_tokens SET revoked_at = now()
WHERE user_id = :user_id::uuid AND revoked_at IS NULL;
