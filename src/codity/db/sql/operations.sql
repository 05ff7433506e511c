-- name: lock_job
-- Operator actions move one job at a time: lock it, check the move in Python
-- (assert_transition), then write. Parameters: $1 job id bigint.
SELECT id, queue_id, status::text AS status FROM jobs WHERE id = $1::bigint FOR UPDATE;

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
-- Parameters: $1 dead letter ids uuid[].
SELECT d.id, d.job_id, d.queue_id, d.handler, d.payload, j.status::text AS job_status
FROM dead_letter_jobs d
LEFT JOIN jobs j ON j.id = d.job_id
WHERE d.id = ANY($1::uuid[])
ORDER BY d.failed_at, d.id
FOR UPDATE OF d;

-- name: pending_dead_letters_of_queue
-- Parameters: $1 queue id.
SELECT id FROM dead_letter_jobs WHERE queue_id = $1::uuid AND replayed_at IS NULL
ORDER BY failed_at, id;

-- name: mark_dead_letter_rows_replayed
-- Parameters: $1 dead letter ids uuid[], $2 new job ids bigint[] (NULL keeps job_id).
UPDATE dead_letter_jobs d
SET replayed_at = now(), replay_count = d.replay_count + 1,
    job_id = COALESCE(f.new_job_id, d.job_id)
FROM unnest($1::uuid[], $2::bigint[]) AS f(id, new_job_id)
WHERE d.id = f.id;

-- name: discard_dead_letters
-- Parameters: $1 dead letter ids uuid[].
DELETE FROM dead_letter_jobs WHERE id = ANY($1::uuid[]);

-- name: set_queue_paused
-- Parameters: $1 queue id, $2 paused boolean.
UPDATE queues SET is_paused = $2::boolean, updated_at = now() WHERE id = $1::uuid RETURNING id;
