-- name: queue_for_enqueue
-- A queue's defaults, with the retry policy it names (if any).
-- Parameters: $1 queue_id uuid.
SELECT q.id, q.project_id, q.name, q.priority, q.concurrency_limit, q.is_paused,
       q.retry_policy_id, q.default_max_attempts, q.default_timeout_ms,
       rp.max_attempts AS policy_max_attempts
FROM queues q
LEFT JOIN retry_policies rp ON rp.id = q.retry_policy_id
WHERE q.id = $1::uuid;

-- name: retry_policies_max_attempts
-- max_attempts of retry policies named by jobs, within the queue's project; unknown (or other
-- projects') ids are simply absent. Parameters: $1 ids uuid[], $2 project id uuid.
SELECT id, max_attempts FROM retry_policies WHERE id = ANY($1::uuid[]) AND project_id = $2::uuid;

-- name: lock_dependencies
-- Enqueue with dependencies: share-lock the jobs depended on, so a completion running right now
-- either finished before (we see it completed and do not wait for it) or waits for our commit
-- (and then its dependants step, a later statement, sees our job_dependencies rows).
-- Only jobs of the same project count: another tenant's job ids are "unknown".
-- Parameters: $1 job ids bigint[], $2 project id uuid.
SELECT j.id, j.status::text AS status
FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE j.id = ANY($1::bigint[]) AND q.project_id = $2::uuid
FOR SHARE OF j;

-- name: insert_jobs
-- Bulk enqueue in one round trip: every column arrives as an array and unnest turns them into
-- rows. Ids are drawn from the identity sequence up front so the caller can map each result to
-- its input row (ord), including rows skipped by an idempotency-key conflict (DO NOTHING: a
-- repeat returns the existing job, it does not fail). One NOTIFY per statement for the queue
-- when something became claimable; PostgreSQL folds repeats within a transaction.
-- Parameters: $1 queue_id uuid, then one array per column.
WITH input AS (
  SELECT t.*, nextval(pg_get_serial_sequence('jobs', 'id')) AS new_id,
         COALESCE(t.at, now() + COALESCE(t.delay_ms, 0) * interval '1 millisecond') AS due
  FROM unnest($2::text[], $3::jsonb[], $4::smallint[], $5::timestamptz[], $6::float8[],
              $7::text[], $8::uuid[], $9::integer[], $10::integer[], $11::uuid[],
              $12::integer[], $13::uuid[])
       WITH ORDINALITY AS t(handler, payload, priority, at, delay_ms, idempotency_key, batch_id,
                            timeout_ms, max_attempts, retry_policy_id, pending, schedule_id, ord)
),
ins AS (
  INSERT INTO jobs (id, queue_id, handler, payload, status, priority, run_at, max_attempts,
                    retry_policy_id, timeout_ms, idempotency_key, batch_id, schedule_id,
                    pending_dependencies)
  SELECT new_id, $1::uuid, handler, payload,
         (CASE WHEN pending > 0 THEN 'waiting'
               WHEN due > now() THEN 'scheduled'
               ELSE 'queued' END)::job_status,
         priority, due, max_attempts, retry_policy_id, timeout_ms, idempotency_key, batch_id,
         schedule_id, pending
  FROM input
  ORDER BY ord
  ON CONFLICT (queue_id, idempotency_key) DO NOTHING
  RETURNING id, status
),
wake AS (
  SELECT pg_notify('codity_jobs', $1::text) AS notified
  WHERE EXISTS (SELECT 1 FROM ins WHERE status = 'queued')
)
SELECT i.ord, ins.id, ins.status::text AS status, i.idempotency_key,
       (SELECT count(*) FROM wake) AS notified
FROM input i
LEFT JOIN ins ON ins.id = i.new_id
ORDER BY i.ord;

-- name: jobs_by_idempotency_key
-- The existing jobs a repeated idempotency key refers to.
-- Parameters: $1 queue_id uuid, $2 keys text[].
SELECT id, status::text AS status, idempotency_key
FROM jobs WHERE queue_id = $1::uuid AND idempotency_key = ANY($2::text[]);

-- name: insert_job_dependencies
-- Parameters: $1 dependant job ids bigint[], $2 depended-on job ids bigint[].
INSERT INTO job_dependencies (job_id, depends_on_id)
SELECT * FROM unnest($1::bigint[], $2::bigint[])
ON CONFLICT DO NOTHING;

-- name: notify_queues
-- Wake idle workers of these queues (LISTEN codity_jobs; the payload is the queue id).
-- Parameters: $1 queue ids uuid[].
SELECT count(pg_notify('codity_jobs', q::text)) FROM (SELECT DISTINCT unnest($1::uuid[]) AS q) s;
