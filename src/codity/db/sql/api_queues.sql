-- The API's queue statements: live depth, statistics, and the configuration a PATCH may change.
-- Pause and resume are state changes of codity.core (operations.sql: set_queue_paused).

-- name: api_queues_list
-- Queues with their retry policy summary, their depth per status (one grouped count over
-- idx_jobs_queue_status_id) and how many jobs a worker could claim this instant (queued and
-- due; zero while paused). Ordered by name, unique per project: the name is the keyset.
-- Parameters: :project_id uuid, :limit int, plus those of the fragments.
SELECT q.id, q.project_id, q.name, q.description, q.priority, q.concurrency_limit, q.is_paused,
       q.draining_since, q.default_max_attempts, q.default_timeout_ms, q.rate_limit_per_minute,
       q.key_concurrency_limit, q.rate_limit_count, q.rate_limit_period_ms, q.rate_limit_per_key,
       q.created_at, q.updated_at,
       rp.id AS rp_id, rp.name AS rp_name, rp.strategy::text AS rp_strategy,
       rp.max_attempts AS rp_max_attempts,
       coalesce(d.depth, '{}'::jsonb) AS depth,
       CASE WHEN q.is_paused THEN 0 ELSE c.claimable END AS claimable
FROM queues q
LEFT JOIN retry_policies rp ON rp.id = q.retry_policy_id
LEFT JOIN LATERAL (
  SELECT jsonb_object_agg(s.status, s.n) AS depth
  FROM (SELECT j.status::text AS status, count(*) AS n
        FROM jobs j WHERE j.queue_id = q.id GROUP BY j.status) s
) d ON true
LEFT JOIN LATERAL (
  SELECT count(*) AS claimable
  FROM jobs j WHERE j.queue_id = q.id AND j.status = 'queued' AND j.run_at <= now()
) c ON true
WHERE q.project_id = :project_id::uuid
/*fragments*/
ORDER BY q.name
LIMIT :limit::int;

-- name: api_queues_when_id
AND q.id = :queue_id::uuid;

-- name: api_queues_after
AND q.name > :after_name::text;

-- name: api_queues_throughput
-- Completed and failed attempts per minute over the last hour, one row per minute even when
-- nothing ran (zeros, not gaps), for the project's queues or one of them (fragment).
-- `failed` counts every attempt that ended in error or timeout, the last one before the
-- dead-letter queue included. The queue ids are an InitPlan, so the join stays an index scan
-- of ix_job_executions_queue_finished (queue_id, finished_at). Parameters: :project_id uuid.
SELECT m.minute,
       count(e.job_id) FILTER (WHERE e.status = 'completed') AS completed,
       count(e.job_id) FILTER (WHERE e.status IN ('failed', 'timed_out')) AS failed
FROM generate_series(date_trunc('minute', now()) - interval '59 minutes',
                     date_trunc('minute', now()), interval '1 minute') AS m(minute)
LEFT JOIN job_executions e
       ON e.queue_id = ANY(ARRAY(SELECT q.id FROM queues q
                                 WHERE q.project_id = :project_id::uuid
                                 /*queues*/))
      AND e.finished_at >= m.minute AND e.finished_at < m.minute + interval '1 minute'
GROUP BY m.minute
ORDER BY m.minute;

-- name: api_queues_throughput_of_queue
-- slot: queues
AND q.id = :queue_id::uuid;

-- name: api_queues_wait
-- Wait = claimed_at - run_at of the queue's jobs claimed in the last hour (the job row holds
-- the current attempt's run_at, so each job contributes its latest attempt).
-- Parameters: :project_id uuid, :queue_id uuid.
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY w) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY w) AS p95,
       count(*) AS samples
FROM (SELECT extract(epoch FROM j.claimed_at - j.run_at) * 1000 AS w
      FROM jobs j JOIN queues q ON q.id = j.queue_id
      WHERE q.project_id = :project_id::uuid AND j.queue_id = :queue_id::uuid
        AND j.claimed_at >= now() - interval '1 hour' AND j.claimed_at >= j.run_at) s;

-- name: api_queues_run
-- Run time = finished_at - started_at of the queue's attempts that ended in the last hour.
-- Parameters: :project_id uuid, :queue_id uuid.
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY r) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY r) AS p95,
       count(*) AS samples
FROM (SELECT extract(epoch FROM e.finished_at - e.started_at) * 1000 AS r
      FROM job_executions e JOIN queues q ON q.id = e.queue_id
      WHERE q.project_id = :project_id::uuid AND e.queue_id = :queue_id::uuid
        AND e.finished_at >= now() - interval '1 hour' AND e.started_at IS NOT NULL) s;

-- name: api_queues_insert
-- Parameters: :project_id uuid and the queue's settings.
INSERT INTO queues (project_id, name, description, priority, concurrency_limit, retry_policy_id,
                    default_max_attempts, default_timeout_ms, rate_limit_per_minute,
                    key_concurrency_limit, rate_limit_count, rate_limit_period_ms,
                    rate_limit_per_key)
VALUES (:project_id::uuid, :name::text, :description::text, :priority::smallint,
        :concurrency_limit::int, :retry_policy_id::uuid, :default_max_attempts::int,
        :default_timeout_ms::int, :rate_limit_per_minute::int, :key_concurrency_limit::int,
        :rate_limit_count::int, :rate_limit_period_ms::int, :rate_limit_per_key::boolean)
RETURNING id;

-- name: api_queues_update
-- A PATCH: each column changes only when its name is in :fields (so a field can be set to
-- NULL, and a field not sent keeps its value). One statement text for every PATCH.
-- Parameters: :project_id uuid, :queue_id uuid, :fields text[], one value per column.
UPDATE queues SET
  description = CASE WHEN 'description' = ANY(:fields::text[])
                     THEN :description::text ELSE description END,
  priority = CASE WHEN 'priority' = ANY(:fields) THEN :priority::smallint ELSE priority END,
  concurrency_limit = CASE WHEN 'concurrency_limit' = ANY(:fields)
                           THEN :concurrency_limit::int ELSE concurrency_limit END,
  retry_policy_id = CASE WHEN 'retry_policy_id' = ANY(:fields)
                         THEN :retry_policy_id::uuid ELSE retry_policy_id END,
  default_max_attempts = CASE WHEN 'default_max_attempts' = ANY(:fields)
                              THEN :default_max_attempts::int ELSE default_max_attempts END,
  default_timeout_ms = CASE WHEN 'default_timeout_ms' = ANY(:fields)
                            THEN :default_timeout_ms::int ELSE default_timeout_ms END,
  rate_limit_per_minute = CASE WHEN 'rate_limit_per_minute' = ANY(:fields)
                               THEN :rate_limit_per_minute::int ELSE rate_limit_per_minute END,
  key_concurrency_limit = CASE WHEN 'key_concurrency_limit' = ANY(:fields)
                               THEN :key_concurrency_limit::int ELSE key_concurrency_limit END,
  rate_limit_count = CASE WHEN 'rate_limit_count' = ANY(:fields)
                          THEN :rate_limit_count::int ELSE rate_limit_count END,
  rate_limit_period_ms = CASE WHEN 'rate_limit_period_ms' = ANY(:fields)
                              THEN :rate_limit_period_ms::int ELSE rate_limit_period_ms END,
  rate_limit_per_key = CASE WHEN 'rate_limit_per_key' = ANY(:fields)
                            THEN COALESCE(:rate_limit_per_key::boolean, false)
                            ELSE rate_limit_per_key END,
  updated_at = now()
WHERE project_id = :project_id::uuid AND id = :queue_id::uuid
RETURNING id;

-- name: api_queues_lock
-- Delete, step 1: lock the queue row (concurrency-limited claims lock it too).
-- Parameters: :project_id uuid, :queue_id uuid.
SELECT id FROM queues WHERE project_id = :project_id::uuid AND id = :queue_id::uuid FOR UPDATE;

-- name: api_queues_busy
-- Delete, step 2: how many of its jobs a worker holds right now (idx_jobs_queue_status_id).
-- Parameters: :project_id uuid, :queue_id uuid.
SELECT count(*) FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE q.project_id = :project_id::uuid AND j.queue_id = :queue_id::uuid
  AND j.status IN ('claimed', 'running');

-- name: api_queues_delete
-- Delete, step 3: the queue and, by cascade, its jobs, schedules and dead letters.
-- Parameters: :project_id uuid, :queue_id uuid.
DELETE FROM queues WHERE project_id = :project_id::uuid AND id = :queue_id::uuid;
