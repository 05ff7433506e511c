-- Organisations. The caller's organisation always comes from the token, never a parameter.

-- name: api_orgs_insert
INSERT INTO organizations (name, slug) VALUES (:name::text, :slug::text)
RETURNING id, name, slug;

-- name: api_orgs_get
SELECT id, name, slug, created_at FROM organizations WHERE id = :org_id::uuid;

-- name: api_orgs_rename
UPDATE organizations SET name = :name::text WHERE id = :org_id::uuid
RETURNING id, name, slug, created_at;

-- name: api_orgs_lock
-- Creating a project, queue or schedule, step 1: the organisation's row, locked, so two
-- creations at once cannot both pass the cap check below. Parameters: :org_id uuid.
SELECT id FROM organizations WHERE id = :org_id::uuid FOR UPDATE;

-- name: api_orgs_count_projects
SELECT count(*) FROM projects WHERE org_id = :org_id::uuid;

-- name: api_orgs_count_queues
SELECT count(*) FROM queues q JOIN projects p ON p.id = q.project_id
WHERE p.org_id = :org_id::uuid;

-- name: api_orgs_count_schedules
SELECT count(*) FROM scheduled_jobs s JOIN queues q ON q.id = s.queue_id
JOIN projects p ON p.id = q.project_id
WHERE p.org_id = :org_id::uuid;
