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
       j.timeout_ms, j.progress, j.last_error, j.cancel_requested_at, j.concurrency_key,
       j.unique_key
FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE q.project_id = :project_id::uuid
/*fragments*/
ORDER BY j.id DESC
LIMIT :limit::int;

-- name: api_jobs_list_by_payload
-- api_jobs_list with a payload search (:payload_match jsonb, containment). The payload GIN
-- leaves leased jobs out (migration 0035), so the newest matches are taken from each half on
-- its own index, then merged: jobs not leased through idx_jobs_payload, leased ones (as many as
-- the fleet's capacity) through idx_jobs_worker_leased. As one condition with OR, a generic
-- plan (what a prepared statement keeps after five runs) walked the primary key backwards
-- and tested every job's payload instead. The other filters (api_jobs_when_*, api_jobs_after)
-- apply in both halves. Parameters: :project_id uuid, :limit int, :payload_match jsonb, plus
-- those of the fragments.
WITH found AS (
  (SELECT j.id FROM jobs j JOIN queues q ON q.id = j.queue_id
   WHERE q.project_id = :project_id::uuid
     AND j.status NOT IN ('claimed', 'running') AND j.payload @> :payload_match::jsonb
   /*fragments*/
   ORDER BY j.id DESC
   LIMIT :limit::int)
  UNION ALL
  (SELECT j.id FROM jobs j JOIN queues q ON q.id = j.queue_id
   WHERE q.project_id = :project_id::uuid
     AND j.status IN ('claimed', 'running') AND j.payload @> :payload_match::jsonb
   /*fragments*/
   ORDER BY j.id DESC
   LIMIT :limit::int)
)
SELECT j.id, j.queue_id, q.name AS queue_name, j.handler, j.status::text AS status, j.priority,
       j.attempt, j.max_attempts, j.run_at, j.created_at, j.updated_at, j.claimed_at,
       j.started_at, j.finished_at, j.idempotency_key, j.batch_id, j.schedule_id, j.worker_id,
       j.timeout_ms, j.progress, j.last_error, j.cancel_requested_at, j.concurrency_key,
       j.unique_key
FROM found f JOIN jobs j ON j.id = f.id JOIN queues q ON q.id = j.queue_id
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
-- Payload search (`payload.customer_id = 42` -> {"customer_id": 42}): containment. The GIN
-- idx_jobs_payload (jsonb_path_ops) holds every job but the leased ones (a claim writes no
-- entry in it: migration 0035); those, as many as the fleet's capacity, are in
-- idx_jobs_worker_leased. Each arm names one index's predicate: a BitmapOr of the two when the
-- plan knows the value (a bulk action's count and windows). The jobs list, newest first with a
-- LIMIT, is api_jobs_list_by_payload instead.
AND ((j.status NOT IN ('claimed', 'running') AND j.payload @> :payload_match::jsonb)
     OR (j.status IN ('claimed', 'running') AND j.payload @> :payload_match::jsonb));

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
       j.timeout_ms, j.progress, j.last_error, j.cancel_requested_at, j.concurrency_key,
       j.unique_key, j.payload, j.result, j.progress_message, j.execution_seq, j.lock_expires_at,
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

-- name: api_jobs_explain
-- Why a job is not running: every fact the claim would weigh, in one read (no locks taken;
-- the answer is a snapshot). The rules that turn these facts into blockers are
-- codity.domain.flow.explain. Other projects appear only as counts (fair shares), never by
-- name or id. A live worker is active AND has beaten within :dead_after_ms (the sweep's
-- DEAD_WORKER_AFTER_MS): a crashed one stays 'active' until the sweep marks it dead, but it
-- claims nothing. Parameters: :project_id uuid, :job_id bigint, :dead_after_ms integer.
WITH job AS (
  SELECT j.id, j.status::text AS status, j.run_at, j.handler, j.concurrency_key,
         j.priority, j.queue_id, q.project_id, q.is_paused, q.concurrency_limit,
         q.key_concurrency_limit, q.rate_limit_count, q.rate_limit_period_ms,
         q.rate_limit_per_key, p.weight
  FROM jobs j JOIN queues q ON q.id = j.queue_id JOIN projects p ON p.id = q.project_id
  WHERE q.project_id = :project_id::uuid AND j.id = :job_id::bigint
),
live AS (  -- live workers serving the job's queue (by name, or every queue: "*")
  SELECT w.id, w.capacity, w.handlers
  FROM workers w, job
  WHERE w.status = 'active'
    AND w.last_heartbeat_at >= now() - :dead_after_ms::integer * interval '1 millisecond'
    AND (EXISTS (SELECT 1 FROM worker_queues wq WHERE wq.worker_id = w.id AND wq.queue_id = job.queue_id)
         OR w.queue_names @> '["*"]'::jsonb)
),
window_state AS (
  SELECT r.slot, r.counts,
         codity_rate_slot(clock_timestamp(), job.rate_limit_period_ms) AS now_slot
  FROM job JOIN queue_rate_windows r
    ON r.queue_id = job.queue_id
   AND r.key = CASE WHEN job.rate_limit_per_key THEN COALESCE(job.concurrency_key, '') ELSE '' END
  WHERE job.rate_limit_count IS NOT NULL
)
SELECT job.*,
       ARRAY(SELECT d.depends_on_id FROM job_dependencies d JOIN jobs dj ON dj.id = d.depends_on_id
             WHERE d.job_id = job.id AND dj.status <> 'completed'
             ORDER BY d.depends_on_id LIMIT 20) AS waiting_on,
       (SELECT count(*) FROM jobs x
        WHERE x.queue_id = job.queue_id AND x.status IN ('claimed', 'running')) AS queue_leased,
       ARRAY(SELECT x.id FROM jobs x
             WHERE x.queue_id = job.queue_id AND x.status IN ('claimed', 'running')
             ORDER BY x.id LIMIT 20) AS queue_holders,
       (SELECT count(*) FROM jobs x
        WHERE x.queue_id = job.queue_id AND x.status IN ('claimed', 'running')
          AND x.concurrency_key = job.concurrency_key) AS key_leased,
       ARRAY(SELECT x.id FROM jobs x
             WHERE x.queue_id = job.queue_id AND x.status IN ('claimed', 'running')
               AND x.concurrency_key = job.concurrency_key
             ORDER BY x.id LIMIT 20) AS key_holders,
       (SELECT codity_rate_used(s.slot, s.counts, s.now_slot) FROM window_state s) AS rate_used,
       (SELECT to_timestamp((min(s.slot - (u.i - 1)) + 51) * job.rate_limit_period_ms / 50.0 / 1000)
        FROM window_state s, unnest(s.counts) WITH ORDINALITY AS u(c, i)
        WHERE u.c > 0 AND s.slot - (u.i - 1) >= s.now_slot - 50) AS rate_next_at,
       (SELECT count(*) FROM (SELECT 1 FROM jobs x
         WHERE x.queue_id = job.queue_id AND x.status = 'queued' AND x.run_at <= now()
           AND (x.priority > job.priority
                OR (x.priority = job.priority AND (x.run_at, x.id) < (job.run_at, job.id)))
         LIMIT 10000) a) AS ahead,
       (SELECT count(*) FROM live) AS live_workers,
       (SELECT count(*) FROM live WHERE live.handlers ? job.handler) AS workers_with_handler,
       (SELECT COALESCE(sum(live.capacity), 0) FROM live) AS live_capacity,
       (SELECT COALESCE(json_agg(json_build_object('own', s.project_id = job.project_id,
                                                   'in_flight', s.n, 'weight', s.weight)
                                 ORDER BY s.project_id = job.project_id DESC, s.n DESC), '[]')
        FROM (SELECT q.project_id, pr.weight, count(*) AS n
              FROM jobs x JOIN queues q ON q.id = x.queue_id JOIN projects pr ON pr.id = q.project_id
              WHERE x.worker_id IN (SELECT live.id FROM live)
                AND x.status IN ('claimed', 'running')
              GROUP BY q.project_id, pr.weight) s) AS in_flight_by_project,
       clock_timestamp() AS read_at  -- the "now" the rules compare run_at and windows with
FROM job;
