-- name: register_worker
-- Parameters: $1 hostname, $2 pid, $3 version, $4 capacity, $5 queue names jsonb, $6 queue ids uuid[],
-- $7 handler names text[].
WITH w AS (
  INSERT INTO workers (hostname, pid, version, capacity, queue_names, handlers)
  VALUES ($1::text, $2::integer, $3::text, $4::integer, $5::jsonb, to_jsonb($7::text[]))
  RETURNING id
),
served AS (
  INSERT INTO worker_queues (worker_id, queue_id)
  SELECT w.id, q FROM w, (SELECT DISTINCT unnest($6::uuid[]) AS q) s
)
SELECT id FROM w;

-- name: set_worker_status
-- stopped/dead freeze uptime via stopped_at; active/draining leave it alone.
-- Parameters: $1 worker id, $2 status text.
UPDATE workers
SET status = $2::worker_status,
    stopped_at = CASE WHEN $2::text IN ('stopped', 'dead') THEN COALESCE(stopped_at, now())
                      ELSE stopped_at END
WHERE id = $1::uuid
RETURNING id;

-- name: queues_by_name
-- flow_control: the queue has a key limit or a rate limit (the worker opens the connection
-- claim_jobs_flow runs on up front; the claim itself reads the settings again).
-- Parameters: $1 names text[] (NULL = every queue).
SELECT id, project_id, name, priority, concurrency_limit, is_paused, retry_policy_id,
       default_max_attempts, default_timeout_ms,
       (key_concurrency_limit IS NOT NULL OR rate_limit_count IS NOT NULL) AS flow_control
FROM queues
WHERE $1::text[] IS NULL OR name = ANY($1::text[])
ORDER BY priority DESC, name, id;

-- name: queue_by_id_in_project
-- Parameters: $1 project id, $2 queue id.
SELECT id, project_id, name, priority, concurrency_limit, is_paused, retry_policy_id,
       default_max_attempts, default_timeout_ms
FROM queues WHERE project_id = $1::uuid AND id = $2::uuid;

-- name: queue_by_name_in_project
-- Parameters: $1 project id, $2 queue name.
SELECT id, project_id, name, priority, concurrency_limit, is_paused, retry_policy_id,
       default_max_attempts, default_timeout_ms
FROM queues WHERE project_id = $1::uuid AND name = $2::text;
