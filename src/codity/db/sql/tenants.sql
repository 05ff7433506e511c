-- name: tenant_of_queue
-- Whose rules a job runs under: the project and organisation of its queue (their quotas) and
-- the project's http_request allowlist. Parameters: :queue_id uuid.
SELECT q.project_id, p.org_id, p.http_allowlist
FROM queues q JOIN projects p ON p.id = q.project_id
WHERE q.id = :queue_id::uuid;
