-- Bulk actions (codity.api.bulk_runner): the bulk_actions row, and the chunk statements that
-- walk the frozen filter in keyset order. Every statement names the project, so an id or a
-- filter can only ever reach the caller's own jobs and dead letters. The state changes
-- themselves are codity.core's (core/bulk.py, operations.sql).

-- name: bulk_actions_insert
-- Parameters: the row's columns, named.
INSERT INTO bulk_actions (project_id, target, action, filter, ids, queue_id, high_water_id,
                          matched, created_by, created_by_api_key, request_id)
VALUES (:project_id::uuid, :target::text, :action::text, :filter::jsonb, :ids::jsonb,
        :queue_id::uuid, :high_water_id::bigint, :matched::int, :created_by::uuid,
        :created_by_api_key::uuid, :request_id::text)
RETURNING *;

-- name: bulk_actions_get
-- One bulk action of the project. Parameters: :project_id uuid, :bulk_action_id uuid.
SELECT * FROM bulk_actions WHERE id = :bulk_action_id::uuid AND project_id = :project_id::uuid;

-- name: bulk_actions_list
-- The project's bulk actions, newest first (ix_bulk_actions_project_id_created_at); the keyset
-- is (created_at, id). Parameters: :project_id uuid, :limit int, and the fragment's.
SELECT * FROM bulk_actions b
WHERE b.project_id = :project_id::uuid
/*fragments*/
ORDER BY b.created_at DESC, b.id DESC
LIMIT :limit::int;

-- name: bulk_actions_after
AND (b.created_at, b.id) < (:after_at::timestamptz, :after_id::uuid);

-- name: bulk_actions_stop
-- Stop: an open action ends as 'stopped'. The row lock waits for a chunk in flight (each chunk
-- holds it), so after this commits no chunk runs and the counts are final.
-- Parameters: :project_id uuid, :bulk_action_id uuid.
UPDATE bulk_actions
SET status = 'stopped', finished_at = now(), updated_at = now()
WHERE id = :bulk_action_id::uuid AND project_id = :project_id::uuid
  AND status IN ('pending', 'running')
RETURNING *, (SELECT p.org_id FROM projects p WHERE p.id = project_id) AS org_id;

-- name: bulk_actions_claim
-- The runner of one API process takes the oldest open action that nobody is working on: a
-- pending one, one it ran itself (after an outage), or a running one whose process stopped
-- making progress :stale_ms ago (it died: the action is resumed from its position). SKIP LOCKED:
-- two API processes never take the same one. Parameters: :owner text, :stale_ms int.
UPDATE bulk_actions b
SET status = 'running', owner = :owner::text, heartbeat_at = now(),
    started_at = COALESCE(b.started_at, now()), updated_at = now()
WHERE b.id = (
  SELECT o.id FROM bulk_actions o
  WHERE o.status IN ('pending', 'running')
    AND (o.status = 'pending' OR o.owner = :owner::text
         OR o.heartbeat_at < now() - make_interval(secs => :stale_ms::int / 1000.0))
  ORDER BY o.created_at
  LIMIT 1
  FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: bulk_actions_lock
-- The first statement of every chunk: the action, locked for the chunk's transaction, still
-- running and still this process's (a stop, or a takeover by another process, ends the run).
-- Parameters: :bulk_action_id uuid, :owner text.
SELECT * FROM bulk_actions
WHERE id = :bulk_action_id::uuid AND owner = :owner::text AND status = 'running'
FOR UPDATE;

-- name: bulk_actions_progress
-- The last statement of a chunk, in its transaction: the chunk's changes and the position
-- commit together, so a resumed run starts after exactly what was done.
-- Parameters: :bulk_action_id uuid, :position jsonb, :processed int, :skipped int.
UPDATE bulk_actions
SET position = :position::jsonb, processed = processed + :processed::int,
    skipped = skipped + :skipped::int, chunks = chunks + 1, heartbeat_at = now(),
    updated_at = now()
WHERE id = :bulk_action_id::uuid
RETURNING *;

-- name: bulk_actions_finish
-- 'completed' (the filter is exhausted) or 'failed' (with the error). Parameters:
-- :bulk_action_id uuid, :status text, :error text.
UPDATE bulk_actions
SET status = :status::text, error = :error::text, finished_at = now(), updated_at = now()
WHERE id = :bulk_action_id::uuid AND status IN ('pending', 'running')
RETURNING *, (SELECT p.org_id FROM projects p WHERE p.id = project_id) AS org_id;

-- name: bulk_jobs_high_water
-- The newest job id at creation: no job enqueued later is ever swept in (a backward scan of
-- the primary key, one index entry).
SELECT COALESCE(max(id), 0) FROM jobs;

-- name: bulk_jobs_count
-- How many of the project's jobs the filter matches (the api_jobs_when_* fragments of the jobs
-- list, with bulk_jobs_when_ids / bulk_jobs_up_to). Parameters: :project_id uuid + fragments'.
SELECT count(*) FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE q.project_id = :project_id::uuid
/*fragments*/;

-- name: bulk_jobs_when_ids
AND j.id = ANY(:ids::bigint[]);

-- name: bulk_jobs_up_to
-- The frozen upper bound (bulk_actions.high_water_id).
AND j.id <= :high_water_id::bigint;

-- name: bulk_jobs_window
-- A chunk's window: the next :chunk ids the frozen filter matches after the position, in id
-- order, read without a lock (the window decides the position and the skipped count).
-- Parameters: :project_id uuid, :after_id bigint, :chunk int + the fragments'.
SELECT j.id FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE q.project_id = :project_id::uuid AND j.id > :after_id::bigint
/*fragments*/
ORDER BY j.id
LIMIT :chunk::int;

-- name: bulk_jobs_lock
-- The window's jobs that still match the filter, locked. SKIP LOCKED: a job a worker is
-- claiming or completing this instant is not waited for; it counts as skipped (repeat the
-- action to catch it). Parameters: :project_id uuid, :window bigint[] + the fragments'.
SELECT j.id, j.queue_id, j.status::text AS status, j.cancel_requested_at
FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE q.project_id = :project_id::uuid AND j.id = ANY(:window::bigint[])
/*fragments*/
ORDER BY j.id
FOR UPDATE OF j SKIP LOCKED;

-- name: bulk_dead_letters_count
-- How many of the project's dead letters the filter matches. Parameters: :project_id uuid +
-- the fragments'.
SELECT count(*) FROM dead_letter_jobs d JOIN queues q ON q.id = d.queue_id
WHERE q.project_id = :project_id::uuid
/*fragments*/;

-- name: bulk_dead_letters_when_queue
AND d.queue_id = :queue_id::uuid;

-- name: bulk_dead_letters_when_pending
AND d.replayed_at IS NULL;

-- name: bulk_dead_letters_when_ids
AND d.id = ANY(:ids::uuid[]);

-- name: bulk_dead_letters_up_to
-- The frozen bound: dead letters written after the action was created are not swept in.
AND d.failed_at <= :frozen_at::timestamptz;

-- name: bulk_dead_letters_window
-- A chunk's window in (failed_at, id) order after the position, unlocked.
-- Parameters: :project_id uuid, :after_at timestamptz, :after_id uuid, :chunk int + fragments'.
SELECT d.id, d.failed_at FROM dead_letter_jobs d JOIN queues q ON q.id = d.queue_id
WHERE q.project_id = :project_id::uuid
  AND (d.failed_at, d.id) > (:after_at::timestamptz, :after_id::uuid)
/*fragments*/
ORDER BY d.failed_at, d.id
LIMIT :chunk::int;

-- name: bulk_dead_letters_lock
-- The window's dead letters that still match, locked, SKIP LOCKED as bulk_jobs_lock.
-- Parameters: :project_id uuid, :window uuid[] + the fragments'.
SELECT d.id FROM dead_letter_jobs d JOIN queues q ON q.id = d.queue_id
WHERE q.project_id = :project_id::uuid AND d.id = ANY(:window::uuid[])
/*fragments*/
ORDER BY d.failed_at, d.id
FOR UPDATE OF d SKIP LOCKED;
