-- Organisations. The caller's organisation always comes from the token, never a parameter.

-- name: api_orgs_insert
INSERT INTO organizations (name, slug) VALUES (:name::text, :slug::text)
RETURNING id, name, slug;

-- name: api_orgs_get
SELECT id, name, slug, created_at FROM organizations WHERE id = :org_id::uuid;

-- name: api_orgs_rename
UPDATE organizations SET name = :name::text WHERE id = :org_id::uuid
RETURNING id, name, slug, created_at;
