-- Memberships (who belongs to which organisation, in which role) and invitations.

-- name: api_members_role
-- Authentication: the caller's role, re-read on every request (a demotion or a removal takes
-- effect on the next call, not when the token expires); NULL for an inactive account.
-- Parameters: :org_id uuid, :user_id uuid.
SELECT m.role
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
-- An invitation for an email that has no account yet; inviting again changes the role.
INSERT INTO invitations (org_id, email, role, invited_by)
VALUES (:org_id::uuid, :email::text, :role::member_role, :invited_by::uuid)
ON CONFLICT (org_id, email) DO UPDATE
   SET role = EXCLUDED.role, invited_by = EXCLUDED.invited_by
RETURNING id, email, role, created_at;

-- name: api_invitations_accept_all
-- At registration: every pending invitation to this email becomes a membership.
WITH accepted AS (
    UPDATE invitations SET accepted_at = now()
     WHERE email = :email::text AND accepted_at IS NULL
 RETURNING org_id, role)
INSERT INTO memberships (org_id, user_id, role)
SELECT org_id, :user_id::uuid, role FROM accepted ON CONFLICT DO NOTHING;
