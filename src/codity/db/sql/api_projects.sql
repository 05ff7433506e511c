-- Projects. Listing and creating name the caller's organisation; the PROJECT-scoped reads and
-- writes name the project alone: the tenancy guard has checked it against the organisation
-- (which is what lets the isolation test prove the guard matters).

-- name: api_projects_org
-- The tenancy guard: which organisation a project belongs to. Parameters: :project_id uuid.
SELECT org_id FROM projects WHERE id = :project_id::uuid;

-- name: api_projects_list
-- Ordered by slug (unique per organisation: the keyset).
-- Parameters: :org_id uuid, :limit int, plus those of the fragments.
SELECT id, name, slug, weight, created_at, http_allowlist FROM projects
WHERE org_id = :org_id::uuid
/*fragments*/
ORDER BY slug
LIMIT :limit::int;

-- name: api_projects_after
AND slug > :after_slug::text;

-- name: api_projects_refs
-- Every project of an organisation, oldest first (the dashboard's project switcher).
SELECT id, name, slug FROM projects WHERE org_id = :org_id::uuid ORDER BY created_at, id;

-- name: api_projects_insert
INSERT INTO projects (org_id, name, slug) VALUES (:org_id::uuid, :name::text, :slug::text)
RETURNING id, name, slug, weight, created_at, http_allowlist;

-- name: api_projects_get
SELECT id, name, slug, weight, created_at, http_allowlist FROM projects
WHERE id = :project_id::uuid;

-- name: api_projects_update
-- A PATCH: NULL keeps the value (no column here may be NULL; '{}' empties the allowlist).
-- Parameters: :project_id uuid, :name text, :weight int, :http_allowlist text[].
UPDATE projects
SET name = COALESCE(:name::text, name),
    weight = COALESCE(:weight::int, weight),
    http_allowlist = COALESCE(:http_allowlist::text[], http_allowlist)
WHERE id = :project_id::uuid
RETURNING id, name, slug, weight, created_at, http_allowlist;

-- name: api_projects_delete
-- Cascades to the project's queues, jobs, schedules, dead letters, policies and API keys.
DELETE FROM projects WHERE id = :project_id::uuid;
