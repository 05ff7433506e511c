-- People who sign in. Emails are stored lower-case (a CHECK enforces it).

-- name: api_users_insert
-- Parameters: :email text, :password_hash text, :display_name text.
INSERT INTO users (email, password_hash, display_name)
VALUES (:email::text, :password_hash::text, :display_name::text)
RETURNING id, email, display_name;

-- name: api_users_by_email
-- Sign-in: the account behind an email, if any. Parameters: :email text.
SELECT id, password_hash, is_active FROM users WHERE email = :email::text;

-- name: api_users_get
-- Parameters: :user_id uuid.
SELECT id, email, display_name FROM users WHERE id = :user_id::uuid;

-- name: api_users_touch_login
-- Parameters: :user_id uuid.
UPDATE users SET last_login_at = now() WHERE id = :user_id::uuid;
