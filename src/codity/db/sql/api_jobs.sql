-- The API's reads of jobs, their executions and log lines. Every statement names the project
-- (jobs reach it through their queue), so an id of another tenant matches no row. State changes
-- do not live here: they go through codity.core (operations.sql, enqueue.sql).

-- name: api_jobs_list
-- The project's jobs, newest first; the keyset is the id. Filters arrive as the api_jobs_when_*
-- fragments, so each filter shape is a statement of its own and each condition a real index
-- condition (idx_jobs_queue_status_id, idx_jobs_batch, the primary key) in custom and generic
-- plans alike. Parameters: :project_id uuid, :limit int, plus those of the fragments.
SELECT j.id, j.queue_id, q.name AS queue_name, j.handler, j.status::text AS status, j.priority,
       j.attempt, j.max_attempts, j.run_at, j.created_at, j.updated_at, j.claimed_at,
       j.started_at, j.finished_at, j.idempotency_key, j.batch_id, j.schedule_id, j.worker_id,
       j.timeout_ms, j.progress, j.last_error, j.cancel_requested_at
FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE q.project_id = :project_id::uuid
/*fragments*/
ORDER BY j.id DESC
LIMIT :limit::int;

-- name: api_jobs_when_id
-- One job (the single read is the list with this condition and limit 1).
AND j.id = :job_id::bigint;

-- name: api_jobs_when_queue
AND j.queue_id = :queue_id::uuid;

-- name: api_jobs_when_status
AND j.status = ANY(:statuses::job_status[]);

-- name: api_jobs_when_handler
AND j.handler = :handler::text;

-- name: api_jobs_when_created_after
AND j.created_at >= :created_after::timestamptz;

-- name: api_jobs_when_created_before
AND j.created_at < :created_before::timestamptz;

-- name: api_jobs_when_payload
-- Payload search (`payload.customer_id = 42` -> {"customer_id": 42}): containment, answered by
-- idx_jobs_payload (GIN, jsonb_path_ops).
AND j.payload @> :payload_match::jsonb;

-- name: api_jobs_when_error
-- Error-text search: every word of the text in the job's last error (full text, 'simple'
-- configuration: no stemming, no stop words), answered by the partial GIN index
-- idx_jobs_error_text (only jobs that have an error are in it).
AND j.last_error IS NOT NULL
AND to_tsvector('simple', j.last_error) @@ plainto_tsquery('simple', :error_text::text);

-- name: api_jobs_when_batch
AND j.batch_id = :batch_id::uuid;

-- name: api_jobs_when_text
-- Text search: an exact job id (NULL when the text is not a number), or a substring of the
-- idempotency key (LIKE wildcards in the text are escaped by the caller).
AND (j.id = :text_id::bigint OR j.idempotency_key ILIKE :text_like::text);

-- name: api_jobs_after
-- The next page: jobs older than the previous page's last one.
AND j.id < :before_id::bigint;

-- name: api_jobs_detail
-- One job with what the detail view shows beyond the list's columns.
-- Parameters: :project_id uuid, :job_id bigint.
SELECT j.id, j.queue_id, q.name AS queue_name, j.handler, j.status::text AS status, j.priority,
       j.attempt, j.max_attempts, j.run_at, j.created_at, j.updated_at, j.claimed_at,
       j.started_at, j.finished_at, j.idempotency_key, j.batch_id, j.schedule_id, j.worker_id,
       j.timeout_ms, j.progress, j.last_error, j.cancel_requested_at,
       j.payload, j.result, j.progress_message, j.execution_seq, j.lock_expires_at,
       j.retry_policy_id, j.pending_dependencies,
       octet_length(j.payload::text) AS payload_size,
       ARRAY(SELECT d.depends_on_id FROM job_dependencies d
             WHERE d.job_id = j.id ORDER BY d.depends_on_id) AS depends_on
FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE q.project_id = :project_id::uuid AND j.id = :job_id::bigint;

-- name: api_jobs_executions
-- A job's attempts, oldest first (the retry history). Executions carry their queue, so the
-- project is checked without touching the jobs table.
-- Parameters: :project_id uuid, :job_id bigint.
SELECT e.execution_seq, e.attempt, e.status::text AS status, e.worker_id, e.claimed_at,
       e.started_at, e.finished_at, e.error, e.traceback,
       extract(epoch FROM e.finished_at - e.started_at) * 1000 AS duration_ms
FROM job_executions e JOIN queues q ON q.id = e.queue_id
WHERE q.project_id = :project_id::uuid AND e.job_id = :job_id::bigint
ORDER BY e.execution_seq;

-- name: api_job_logs_latest
-- The last :limit log lines of a job, returned oldest first (ix_job_logs_job_id).
-- Parameters: :project_id uuid, :job_id bigint, :limit int.
SELECT * FROM (
  SELECT l.id, l.execution_seq, l.level, l.message, l.fields, l.created_at
  FROM job_logs l
  WHERE l.job_id = :job_id::bigint
    AND EXISTS (SELECT 1 FROM jobs j JOIN queues q ON q.id = j.queue_id
                WHERE j.id = :job_id AND q.project_id = :project_id::uuid)
  ORDER BY l.id DESC
  LIMIT :limit::int
) latest
ORDER BY id;

-- name: api_job_logs_list
-- A page of a job's log lines, oldest first; the keyset is the line id.
-- Parameters: :project_id uuid, :job_id bigint, :limit int, plus api_job_logs_after's.
SELECT l.id, l.execution_seq, l.level, l.message, l.fields, l.created_at
FROM job_logs l
WHERE l.job_id = :job_id::bigint
  AND EXISTS (SELECT 1 FROM jobs j JOIN queues q ON q.id = j.queue_id
              WHERE j.id = :job_id AND q.project_id = :project_id::uuid)
/*fragments*/
ORDER BY l.id
LIMIT :limit::int;

-- name: api_job_logs_after
AND l.id > :after_id::bigint;
