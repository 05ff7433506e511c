-- Draining a queue (docs/DASHBOARD.md, "Queues"): it takes no new jobs, workers finish what it
-- has, and once nothing of it is unfinished the scheduler pauses it and the drain ends.

-- name: start_drain
-- Parameters: $1 project id, $2 queue id. Returns the queue id (NULL: not this project's).
UPDATE queues SET draining_since = coalesce(draining_since, now()), updated_at = now()
WHERE project_id = $1::uuid AND id = $2::uuid
RETURNING id;

-- name: cancel_drain
-- Resuming a queue ends its drain too. Parameters: $1 project id, $2 queue id.
UPDATE queues SET draining_since = NULL, updated_at = now()
WHERE project_id = $1::uuid AND id = $2::uuid AND draining_since IS NOT NULL;

-- name: queue_draining_since
-- Parameters: $1 project id, $2 queue ids uuid[]. The draining ones among them.
SELECT id, name FROM queues
WHERE project_id = $1::uuid AND id = ANY($2::uuid[]) AND draining_since IS NOT NULL;

-- name: finish_drains
-- Draining queues with nothing unfinished left are paused and their drain ends (the queues
-- trigger announces the pause to the dashboard). idx_jobs_queue_status_id answers each check.
UPDATE queues q SET is_paused = true, draining_since = NULL, updated_at = now()
WHERE q.draining_since IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.queue_id = q.id
                    AND j.status IN ('waiting', 'scheduled', 'queued', 'claimed', 'running'))
RETURNING q.id;
