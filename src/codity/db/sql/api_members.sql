-- Memberships (who belongs to which organisation, in which role) and invitations.

-- name: api_members_role
-- Authentication: the caller's role, re-read on every request (a demotion or a removal takes
-- effect on the next call, not when the token expires), and the instant before which the
-- account's access tokens are refused. No row for an inactive account.
-- Parameters: :org_id uuid, :user_id uuid.
SELECT m.role, u.sessions_valid_after
FROM memberships m JOIN users u ON u.id = m.user_id
WHERE m.org_id = :org_id::uuid AND m.user_id = :user_id::uuid AND u.is_active;

-- name: api_members_list
-- Ordered by email (unique: the keyset). Parameters: :org_id uuid, :limit int, fragments'.
SELECT u.id AS user_id, u.email, u.display_name AS name, m.role, m.created_at AS joined_at
FROM memberships m JOIN users u ON u.id = m.user_id
WHERE m.org_id = :org_id::uuid
/*fragments*/
ORDER BY u.email
LIMIT :limit::int;

-- name: api_members_after
AND u.email > :after_email::text;

-- name: api_members_get
SELECT u.id AS user_id, u.email, u.display_name AS name, m.role, m.created_at AS joined_at
FROM memberships m JOIN users u ON u.id = m.user_id
WHERE m.org_id = :org_id::uuid AND m.user_id = :user_id::uuid;

-- name: api_members_insert
INSERT INTO memberships (org_id, user_id, role)
VALUES (:org_id::uuid, :user_id::uuid, :role::member_role);

-- name: api_members_first
-- The organisation a sign-in starts in: the oldest membership.
SELECT org_id, role FROM memberships WHERE user_id = :user_id::uuid
ORDER BY created_at, org_id LIMIT 1;

-- name: api_members_of_org
-- One membership, for a token that names its organisation (refresh, switch-org).
SELECT org_id, role FROM memberships WHERE org_id = :org_id::uuid AND user_id = :user_id::uuid;

-- name: api_members_orgs_of_user
-- Every organisation a person belongs to, oldest membership first (/auth/me).
SELECT o.id, o.name, o.slug, m.role
FROM memberships m JOIN organizations o ON o.id = m.org_id
WHERE m.user_id = :user_id::uuid
ORDER BY m.created_at, o.id;

-- name: api_members_lock_owners
-- A role change or removal, step 1: the organisation's owners, locked, so two owners demoting
-- each other at once cannot leave the organisation without one.
SELECT user_id FROM memberships WHERE org_id = :org_id::uuid AND role = 'owner' FOR UPDATE;

-- name: api_members_lock
-- Step 2: the member's current role, locked.
SELECT role FROM memberships WHERE org_id = :org_id::uuid AND user_id = :user_id::uuid
FOR UPDATE;

-- name: api_members_set_role
UPDATE memberships SET role = :role::member_role
WHERE org_id = :org_id::uuid AND user_id = :user_id::uuid;

-- name: api_members_delete
DELETE FROM memberships WHERE org_id = :org_id::uuid AND user_id = :user_id::uuid;

-- name: api_invitations_upsert
-- An invitation: a fresh single-use token (only its hash here) that expires. Inviting the same
-- email again replaces the previous token, role and expiry (the old link stops working).
-- Parameters: :org_id uuid, :email text, :role member_role, :invited_by uuid,
-- :token_hash bytea, :ttl_days int.
INSERT INTO invitations (org_id, email, role, invited_by, token_hash, expires_at)
VALUES (:org_id::uuid, :email::text, :role::member_role, :invited_by::uuid, :token_hash::bytea,
        now() + make_interval(days => :ttl_days::int))
ON CONFLICT (org_id, email) DO UPDATE
   SET role = EXCLUDED.role, invited_by = EXCLUDED.invited_by,
       token_hash = EXCLUDED.token_hash, expires_at = EXCLUDED.expires_at,
       created_at = now(), accepted_at = NULL, accepted_by = NULL, revoked_at = NULL
RETURNING id, email, role, created_at, expires_at,
          (SELECT u.email FROM users u WHERE u.id = :invited_by::uuid) AS invited_by_email;

-- name: api_invitations_list
-- The organisation's open invitations (not accepted, not revoked; expired ones included, so
-- they can be seen and sent again), newest first; the keyset is (created_at, id).
-- Parameters: :org_id uuid, :limit int, plus those of the fragments.
SELECT i.id, i.email, i.role, i.created_at, i.expires_at, u.email AS invited_by_email
FROM invitations i LEFT JOIN users u ON u.id = i.invited_by
WHERE i.org_id = :org_id::uuid AND i.accepted_at IS NULL AND i.revoked_at IS NULL
/*fragments*/
ORDER BY i.created_at DESC, i.id DESC
LIMIT :limit::int;

-- name: api_invitations_after
AND (i.created_at, i.id) < (:after_created_at::timestamptz, :after_id::uuid);

-- name: api_invitations_revoke
-- The token stops working at once. Parameters: :org_id uuid, :invitation_id uuid.
UPDATE invitations SET revoked_at = now(), token_hash = NULL
WHERE org_id = :org_id::uuid AND id = :invitation_id::uuid
  AND accepted_at IS NULL AND revoked_at IS NULL
RETURNING id;

-- name: api_invitations_accept
-- The signed-in, verified invitee accepts: once, before it expires, only for their own
-- (verified) email. The token is cleared, so it cannot be used again.
-- Parameters: :token_hash bytea, :user_id uuid. Returns the organisation and the role.
UPDATE invitations i
   SET accepted_at = now(), accepted_by = u.id, token_hash = NULL
  FROM users u
 WHERE i.token_hash = :token_hash::bytea
   AND u.id = :user_id::uuid AND u.email = i.email AND u.email_verified_at IS NOT NULL
   AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > now()
RETURNING i.org_id, i.role;
