-- name: lock_job
-- Operator actions move one job at a time: lock it, check the move in Python
-- (assert_transition), then write. Only a job of the project is found (and locked): the
-- writes that follow name the row this statement returned.
-- Parameters: $1 job id bigint, $2 project id uuid.
SELECT j.id, j.queue_id, j.status::text AS status
FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE j.id = $1::bigint AND q.project_id = $2::uuid
FOR UPDATE OF j;

-- name: cancel_now
-- A job not yet leased is cancelled at once. Parameters: $1 job id.
UPDATE jobs SET status = 'cancelled', finished_at = now(), updated_at = now()
WHERE id = $1::bigint;

-- name: request_cancel
-- A leased job is cancelled by request: the worker sees it at its next heartbeat, stops the
-- handler and reports kind='cancelled'. Parameters: $1 job id.
UPDATE jobs SET cancel_requested_at = COALESCE(cancel_requested_at, now()), updated_at = now()
WHERE id = $1::bigint;

-- name: requeue_job
-- Retry/replay: back to 'queued' with a fresh attempt budget. execution_seq is untouched, so the
-- next claim gets a new, higher one. Parameters: $1 job ids bigint[].
UPDATE jobs
SET status = 'queued', attempt = 0, run_at = now(), finished_at = NULL, result = NULL,
    cancel_requested_at = NULL, lock_expires_at = NULL, progress = NULL, progress_message = NULL,
    updated_at = now()
WHERE id = ANY($1::bigint[])
RETURNING id, queue_id;

-- name: mark_dead_letters_replayed
-- Parameters: $1 job ids bigint[] (every pending dead letter of those jobs).
UPDATE dead_letter_jobs SET replayed_at = now(), replay_count = replay_count + 1
WHERE job_id = ANY($1::bigint[]) AND replayed_at IS NULL;

-- name: lock_dead_letters
-- The project's dead letters among the ids, locked; ids of another project are not found.
-- Parameters: $1 dead letter ids uuid[], $2 project id uuid.
SELECT d.id, d.job_id, d.queue_id, d.handler, d.payload, j.status::text AS job_status
FROM dead_letter_jobs d
JOIN queues q ON q.id = d.queue_id
LEFT JOIN jobs j ON j.id = d.job_id
WHERE d.id = ANY($1::uuid[]) AND q.project_id = $2::uuid
ORDER BY d.failed_at, d.id
FOR UPDATE OF d;

-- name: pending_dead_letters_of_queue
-- Oldest first, at most $3 (NULL: all): a replay never re-runs more than the API reserved
-- against the enqueue quotas, even if dead letters arrived since it counted them.
-- Parameters: $1 queue id, $2 project id uuid, $3 limit integer or NULL.
SELECT d.id FROM dead_letter_jobs d JOIN queues q ON q.id = d.queue_id
WHERE d.queue_id = $1::uuid AND q.project_id = $2::uuid AND d.replayed_at IS NULL
ORDER BY d.failed_at, d.id
LIMIT $3::integer;

-- name: mark_dead_letter_rows_replayed
-- Parameters: $1 dead letter ids uuid[], $2 new job ids bigint[] (NULL keeps job_id).
UPDATE dead_letter_jobs d
SET replayed_at = now(), replay_count = d.replay_count + 1,
    job_id = COALESCE(f.new_job_id, d.job_id)
FROM unnest($1::uuid[], $2::bigint[]) AS f(id, new_job_id)
WHERE d.id = f.id;

-- name: discard_dead_letters
-- The project's dead letters among the ids; returns the ids deleted (the caller refuses the
-- whole discard, rolling back, when one of them was not the project's).
-- Parameters: $1 dead letter ids uuid[], $2 project id uuid.
DELETE FROM dead_letter_jobs d USING queues q
WHERE q.id = d.queue_id AND d.id = ANY($1::uuid[]) AND q.project_id = $2::uuid
RETURNING d.id;

-- name: set_queue_paused
-- Parameters: $1 queue id, $2 paused boolean, $3 project id uuid.
UPDATE queues SET is_paused = $2::boolean, updated_at = now()
WHERE id = $1::uuid AND project_id = $3::uuid
RETURNING id;

-- name: cancel_now_many
-- Bulk cancel (codity.core.bulk): the jobs, locked by the caller and not yet leased, are
-- cancelled at once, as cancel_now does for one. Parameters: $1 job ids bigint[].
UPDATE jobs SET status = 'cancelled', finished_at = now(), updated_at = now()
WHERE id = ANY($1::bigint[]);

-- name: request_cancel_many
-- Bulk cancel of leased jobs: by request, as request_cancel does for one (the worker stops the
-- handler at its next heartbeat). Parameters: $1 job ids bigint[].
UPDATE jobs SET cancel_requested_at = COALESCE(cancel_requested_at, now()), updated_at = now()
WHERE id = ANY($1::bigint[]);

-- name: delete_finished_jobs
-- Bulk delete: only finished jobs (completed, cancelled, dead_letter: what retention prunes),
-- locked by the caller. Executions and logs go with them (jobs_delete_executions and the
-- cascade); dead letters keep their own copy. Parameters: $1 job ids bigint[].
DELETE FROM jobs
WHERE id = ANY($1::bigint[]) AND status IN ('completed', 'cancelled', 'dead_letter')
RETURNING id;
