-- People who sign in, and the verification of their email address. Emails are stored
-- lower-case (a CHECK enforces it).

-- name: api_users_insert
-- A new, unverified account. Parameters: :email text, :password_hash text, :display_name text.
INSERT INTO users (email, password_hash, display_name)
VALUES (:email::text, :password_hash::text, :display_name::text)
RETURNING id, email, display_name, email_verified_at;

-- name: api_users_by_email
-- Sign-in: the account behind an email, if any. Parameters: :email text.
SELECT id, email, display_name, password_hash, is_active, email_verified_at
FROM users WHERE email = :email::text;

-- name: api_users_get
-- Parameters: :user_id uuid.
SELECT id, email, display_name, password_hash, is_active, email_verified_at
FROM users WHERE id = :user_id::uuid;

-- name: api_users_touch_login
-- Parameters: :user_id uuid.
UPDATE users SET last_login_at = now() WHERE id = :user_id::uuid;

-- name: api_users_set_password
-- A new password ends every session issued before it: access tokens through
-- sessions_valid_after (checked on every request), refresh tokens by the caller revoking
-- their families in the same transaction. :valid_after comes from the API's clock, the clock
-- of a token's `iat_ms`. Parameters: :user_id uuid, :password_hash text,
-- :valid_after timestamptz.
UPDATE users SET password_hash = :password_hash::text,
                 sessions_valid_after = :valid_after::timestamptz
WHERE id = :user_id::uuid;

-- name: api_users_end_sessions
-- "Sign out everywhere": access tokens issued before :valid_after are refused.
UPDATE users SET sessions_valid_after = :valid_after::timestamptz WHERE id = :user_id::uuid;

-- name: api_email_verifications_insert
-- One link sent; its signed token names this row. Parameters: :id uuid, :user_id uuid,
-- :email text, :ttl_s int.
INSERT INTO email_verifications (id, user_id, email, expires_at)
VALUES (:id::uuid, :user_id::uuid, :email::text, now() + make_interval(secs => :ttl_s::int));

-- name: api_email_verifications_use
-- The link was opened: it works once, before it expires, for the email it was sent to (an
-- address changed since is not verified by an old link). Marks the account verified.
-- Parameters: :id uuid, :user_id uuid, :email text. Returns the user id, or no row.
WITH used AS (
    UPDATE email_verifications v SET used_at = now()
     WHERE v.id = :id::uuid AND v.user_id = :user_id::uuid AND v.email = :email::text
       AND v.used_at IS NULL AND v.expires_at > now()
 RETURNING v.user_id, v.email
)
UPDATE users u SET email_verified_at = coalesce(u.email_verified_at, now())
FROM used
WHERE u.id = used.user_id AND u.email = used.email
RETURNING u.id;
