-- The API's reads of dead letters. Replay and discard are codity.core's (operations.sql).

-- name: api_dead_letters_list
-- Most recent first; the keyset is (failed_at, id). The pending-and-one-queue shape is served
-- by ix_dead_letter_jobs_queue_pending (queue_id, failed_at DESC) WHERE replayed_at IS NULL.
-- Parameters: :project_id uuid, :limit int, plus those of the fragments.
SELECT d.id, d.job_id, d.queue_id, q.name AS queue_name, d.handler, d.error, d.attempts,
       d.failed_at, d.replayed_at, d.replay_count, d.payload,
       octet_length(d.payload::text) AS payload_size
FROM dead_letter_jobs d JOIN queues q ON q.id = d.queue_id
WHERE q.project_id = :project_id::uuid
/*fragments*/
ORDER BY d.failed_at DESC, d.id DESC
LIMIT :limit::int;

-- name: api_dead_letters_when_queue
AND d.queue_id = :queue_id::uuid;

-- name: api_dead_letters_when_pending
-- Not replayed yet (the default view).
AND d.replayed_at IS NULL;

-- name: api_dead_letters_after
AND (d.failed_at, d.id) < (:after_failed_at::timestamptz, :after_id::uuid);

-- name: api_dead_letters_count
-- How many dead letters match the filter (the same fragments as the list, without the page).
SELECT count(*)
FROM dead_letter_jobs d JOIN queues q ON q.id = d.queue_id
WHERE q.project_id = :project_id::uuid
/*fragments*/;

-- name: api_dead_letters_reasons
-- The most frequent errors among the dead letters that match the filter.
-- Parameters: :project_id uuid, :top int, plus the filter's fragments.
SELECT left(d.error, 500) AS error, count(*) AS count
FROM dead_letter_jobs d JOIN queues q ON q.id = d.queue_id
WHERE q.project_id = :project_id::uuid
/*fragments*/
GROUP BY 1
ORDER BY 2 DESC, 1
LIMIT :top::int;
