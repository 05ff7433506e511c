-- name: complete_jobs
-- Flush many finished jobs in ONE statement (one round trip, no explicit transaction): fenced
-- update to 'completed', the attempt's execution row (written once, now that the attempt has
-- ended), and the dependants step, so the three can never disagree. Jobs whose fence no longer
-- holds are not returned (lease lost).
-- The dependants step is codity_release_dependants(), a VOLATILE function, called once after
-- the UPDATE (it reads `done`): it takes a fresh snapshot, so it sees job_dependencies rows an
-- enqueue committed while this UPDATE waited on that enqueue's share lock (the statement's own
-- snapshot would not, and the dependant would wait forever). It NOTIFYs the queues of jobs it
-- made claimable. With no dependants it is one index probe (migration 0025: the release
-- statement runs only when the probe finds one). `freed` wakes
-- the workers of limited queues (below): one probe of queues per queue in the batch.
-- A fast job may complete straight from 'claimed' (the worker marks a job running only once it
-- has run for a moment), so the worker sends when the handler started: $5, in whole
-- microseconds since the Unix epoch (core.epoch: the driver builds or converts a datetime per
-- timestamptz, a third of a batch's encoding; the integer times an interval is exact below
-- 2^53 microseconds, the year 2255).
-- Parameters: $1 job ids bigint[], $2 worker ids uuid[], $3 seqs integer[], $4 results jsonb[]
-- (NULL when every result is: unnest pads a NULL array with NULLs), $5 handler start times as
-- epoch microseconds bigint[] (NULL where unknown).
WITH f AS (
  SELECT f.id, f.worker_id, f.seq, f.result,
         'epoch'::timestamptz + f.started_us * interval '1 microsecond' AS started_at
  FROM unnest($1::bigint[], $2::uuid[], $3::integer[], $4::jsonb[], $5::bigint[])
    AS f(id, worker_id, seq, result, started_us)
),
done AS (
  UPDATE jobs j
  SET status = 'completed', result = f.result, finished_at = now(), updated_at = now(),
      lock_expires_at = NULL, cancel_requested_at = NULL,
      started_at = COALESCE(j.started_at, f.started_at)
  FROM f
  -- Planner steering: comparing status as text keeps the planner off the leased partial
  -- indexes, whose statistics (taken when few jobs were leased) make a full scan of them per
  -- input row look free; so each input row finds its job by primary key. No `j.id = ANY($1)`
  -- here (unlike the colder batch statements): the planner estimates that side at one row and
  -- then compares every job with every input row, n² for a batch (measured: 5.8 -> 3.9 ms per
  -- 100 completions, equal at 500).
  WHERE j.id = f.id AND j.worker_id = f.worker_id AND j.execution_seq = f.seq
    AND j.status::text IN ('claimed', 'running')
  RETURNING j.id, j.queue_id, j.execution_seq, j.attempt, j.worker_id, j.claimed_at, j.started_at
),
executions AS (
  INSERT INTO job_executions (job_id, queue_id, execution_seq, attempt, worker_id, status,
                              claimed_at, started_at)
  SELECT id, queue_id, execution_seq, attempt, worker_id, 'completed', claimed_at, started_at
  FROM done
),
dependants AS (
  SELECT codity_release_dependants(array_agg(id)) AS woken FROM done
),
-- A job of a queue with a concurrency limit or a key limit ended: a job its limit held back may
-- now be claimed, by any worker. Nothing else tells them (a queue's freed slot makes no row
-- change a claimer could see otherwise): without it such a queue ran one job per poll interval.
freed AS (
  SELECT count(pg_notify('codity_jobs', q.id::text)) AS n
  FROM queues q
  WHERE q.id = ANY(ARRAY(SELECT DISTINCT queue_id FROM done))
    AND (q.concurrency_limit IS NOT NULL OR q.key_concurrency_limit IS NOT NULL)
)
SELECT d.id, (SELECT woken FROM dependants) AS woken, (SELECT n FROM freed) AS freed
FROM done d;

-- name: cancel_dependants
-- A job was dead-lettered or cancelled: every job that (transitively) waits on it can never
-- run, so cancel them all. Returns the cancelled ids.
-- Parameters: $1 job ids bigint[].
WITH RECURSIVE doomed(id) AS (
  SELECT d.job_id FROM job_dependencies d WHERE d.depends_on_id = ANY($1::bigint[])
  UNION
  -- LATERAL ... OFFSET 0: an index probe per job found, whatever the plan's estimates
  SELECT x.job_id FROM doomed CROSS JOIN LATERAL (
    SELECT d.job_id FROM job_dependencies d WHERE d.depends_on_id = doomed.id OFFSET 0
  ) x
)
UPDATE jobs j
SET status = 'cancelled', finished_at = now(), updated_at = now(),
    last_error = 'a job it depends on was dead-lettered or cancelled'
-- = ANY(ARRAY(...)): by primary key in the writer's kept (generic) plan too (worker.connection)
WHERE j.id = ANY(ARRAY(SELECT id FROM doomed)) AND j.status IN ('waiting', 'scheduled', 'queued')
RETURNING j.id;

-- name: lock_failing_jobs
-- Failures: lock the fenced jobs and read what the retry decision needs (attempts and the
-- effective retry policy: the job's own, else its queue's). Python computes the backoff with
-- the one implementation in codity.domain.backoff, then apply_failures writes it. `limited`:
-- the job's queue has a concurrency or key limit, whose freed slot core.outcomes.fail notifies.
-- Parameters: $1 job ids bigint[], $2 worker ids uuid[], $3 seqs integer[].
SELECT j.id, j.execution_seq, j.queue_id, j.attempt, j.max_attempts, j.status::text AS status,
       rp.strategy::text AS strategy, rp.base_delay_ms, rp.max_delay_ms, rp.jitter,
       (q.concurrency_limit IS NOT NULL OR q.key_concurrency_limit IS NOT NULL) AS limited
FROM jobs j
JOIN unnest($1::bigint[], $2::uuid[], $3::integer[]) AS f(id, worker_id, seq)
  ON j.id = f.id AND j.worker_id = f.worker_id AND j.execution_seq = f.seq
JOIN queues q ON q.id = j.queue_id
LEFT JOIN retry_policies rp ON rp.id = COALESCE(j.retry_policy_id, q.retry_policy_id)
WHERE j.id = ANY($1::bigint[])  -- planner steering: see complete_jobs
  AND j.status::text IN ('claimed', 'running')
ORDER BY j.id
FOR UPDATE OF j;

-- name: apply_failures
-- Write the decided outcome of many failed attempts in one statement: the job's new status
-- (scheduled/queued for a retry after $3 ms, dead_letter, or cancelled), the attempt's
-- execution row, and a dead-letter copy (handler, payload, error, attempts) for those that
-- ran out of attempts. Rows were locked by lock_failing_jobs in this transaction.
-- Parameters: $1 ids bigint[], $2 new statuses text[], $3 delay_ms bigint[], $4 errors text[],
-- $5 tracebacks text[], $6 execution statuses text[], $7 handler start times timestamptz[].
WITH f AS (
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[],
                       $7::timestamptz[])
    AS f(id, status, delay_ms, error, traceback, exec_status, started_at)
),
moved AS (
  UPDATE jobs j
  SET status = f.status::job_status,
      run_at = CASE WHEN f.status IN ('scheduled', 'queued')
                    THEN now() + f.delay_ms * interval '1 millisecond' ELSE j.run_at END,
      last_error = f.error,
      lock_expires_at = NULL,
      finished_at = CASE WHEN f.status IN ('dead_letter', 'cancelled') THEN now() END,
      cancel_requested_at = CASE WHEN f.status = 'cancelled' THEN j.cancel_requested_at END,
      started_at = COALESCE(j.started_at, f.started_at),
      updated_at = now()
  FROM f
  WHERE j.id = ANY($1::bigint[]) AND j.id = f.id
  RETURNING j.id, j.queue_id, j.handler, j.payload, j.execution_seq, j.attempt, j.worker_id,
            j.claimed_at, j.started_at, j.status::text AS status, f.error, f.traceback,
            f.exec_status
),
executions AS (
  INSERT INTO job_executions (job_id, queue_id, execution_seq, attempt, worker_id, status,
                              claimed_at, started_at, error, traceback)
  SELECT id, queue_id, execution_seq, attempt, worker_id, exec_status::execution_status,
         claimed_at, started_at, error, traceback
  FROM moved
),
dead AS (
  INSERT INTO dead_letter_jobs (job_id, queue_id, handler, payload, error, attempts)
  SELECT id, queue_id, handler, payload, error, attempt FROM moved WHERE status = 'dead_letter'
)
SELECT id, queue_id, status FROM moved;

-- name: release_jobs
-- Graceful drain: give leased jobs back. Back to 'queued' with the attempt NOT charged
-- (refund: attempt - 1; execution_seq stays, so the next claim gets a new identity), and a
-- 'released' execution row for the attempt that was interrupted.
-- Parameters: $1 job ids bigint[], $2 worker ids uuid[], $3 seqs integer[].
WITH f AS (
  SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::integer[]) AS f(id, worker_id, seq)
),
back AS (
  UPDATE jobs j
  SET status = 'queued', attempt = GREATEST(j.attempt - 1, 0), lock_expires_at = NULL,
      progress = NULL, progress_message = NULL, updated_at = now()
  FROM f
  WHERE j.id = ANY($1::bigint[])  -- planner steering: see complete_jobs
    AND j.id = f.id AND j.worker_id = f.worker_id AND j.execution_seq = f.seq
    AND j.status::text IN ('claimed', 'running')
  RETURNING j.id, j.queue_id, j.execution_seq, j.attempt + 1 AS attempt, j.worker_id,
            j.claimed_at, j.started_at
),
executions AS (
  INSERT INTO job_executions (job_id, queue_id, execution_seq, attempt, worker_id, status,
                              claimed_at, started_at, error)
  SELECT id, queue_id, execution_seq, attempt, worker_id, 'released', claimed_at, started_at,
         'released by the worker during graceful shutdown'
  FROM back
)
SELECT id, queue_id FROM back;
