-- Fencing: every write after the claim names the job, the worker and the execution it holds,
-- and only touches a job still leased (claimed/running). A worker whose lease expired and whose
-- job was re-claimed by someone else matches no row: its write changes nothing, and the caller
-- reports that job as lease lost.

-- name: mark_running
-- The handler has started. Parameters: $1 job ids bigint[], $2 worker ids uuid[], $3 seqs int[],
-- $4 handler start times timestamptz[] (NULL: now).
UPDATE jobs j
SET status = 'running', started_at = COALESCE(j.started_at, f.started_at, now()), updated_at = now()
FROM unnest($1::bigint[], $2::uuid[], $3::integer[], $4::timestamptz[])
  AS f(id, worker_id, seq, started_at)
WHERE j.id = ANY($1::bigint[])  -- planner steering: see complete_jobs in outcomes.sql
  AND j.id = f.id AND j.worker_id = f.worker_id AND j.execution_seq = f.seq
  AND j.status::text IN ('claimed', 'running')
RETURNING j.id;

-- name: heartbeat
-- ONE statement per worker per beat. The worker sends the fences it really has in hand (job id +
-- execution_seq: running handlers and finished outcomes not yet recorded); the statement
-- 1. extends exactly those leases (a lease held under this worker's id is NOT extended just
--    because of the id: a job the worker lost track of must not be kept forever); the new
--    expiry is the only column it changes and no index holds it, so each extension is a HOT
--    update (migration 0034);
-- 2. returns the fences it extended (ids and execution_seqs: a held fence missing from them is
--    gone, and the worker cancels that attempt's handler or discards its outcome — by fence,
--    because a worker may hold a stale attempt and a new one of the same job at once, after
--    its lease was reaped during an outage and it claimed the job again) and which of them an
--    operator asked to cancel;
-- 3. gives back at once every job leased under this worker's id that the worker does not hold
--    (say, a claim that committed but whose reply never arrived): back to 'queued' with the
--    attempt refunded and a 'lost' execution row, like the reaper, but without waiting for the
--    lease to run out; cancelled instead when its cancel was requested, with its dependants.
--    The worker never sends this while a claim of its own is in flight (it serialises the two),
--    so a job it is about to start is never given back;
-- 4. refreshes the worker's denormalised last_heartbeat_at, in_flight and lingering_threads,
--    publishes what it holds per queue (load_queue_ids / load_counts, from the leases it
--    extended: the fair shares of every worker's claims weigh it, docs/CONCURRENCY.md), and
--    bumps the compact per-minute history row.
-- Parameters: $1 worker_id uuid, $2 lease_ms integer, $3 in_flight integer,
-- $4 held job ids bigint[], $5 their execution_seqs integer[], $6 lingering sync-handler
-- threads integer (attempts ended, threads still running: shown in the worker's row).
WITH held AS (
  SELECT * FROM unnest($4::bigint[], $5::integer[]) AS h(id, seq)
),
extended AS (
  UPDATE jobs j
  SET lock_expires_at = now() + $2::integer * interval '1 millisecond'
  FROM held h
  -- status as text: find each held job by primary key (see complete_jobs in outcomes.sql)
  WHERE j.id = h.id AND j.execution_seq = h.seq AND j.worker_id = $1::uuid
    AND j.status::text IN ('claimed', 'running')
  RETURNING j.id, j.execution_seq, j.cancel_requested_at, j.queue_id
),
load AS (  -- one row: the leases extended per queue
  SELECT COALESCE(array_agg(x.queue_id ORDER BY x.queue_id), '{}') AS queue_ids,
         COALESCE(array_agg(x.n ORDER BY x.queue_id), '{}') AS counts
  FROM (SELECT e.queue_id, count(*)::integer AS n FROM extended e GROUP BY e.queue_id) x
),
stray AS (
  UPDATE jobs j
  SET status = (CASE WHEN j.cancel_requested_at IS NULL THEN 'queued' ELSE 'cancelled' END)::job_status,
      attempt = GREATEST(j.attempt - 1, 0),
      lock_expires_at = NULL,
      finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL ELSE now() END,
      progress = NULL, progress_message = NULL, updated_at = now()
  WHERE j.worker_id = $1::uuid AND j.status IN ('claimed', 'running')
    -- NOT IN over a subquery: a hashed SubPlan, one probe per leased job. The NOT EXISTS it
    -- replaces was planned as a nested-loop anti join (the planner takes a worker's leased
    -- jobs for one row), comparing every leased job with every held one: 76 of a beat's 88 ms
    -- for a worker holding 1,000 jobs. Neither side is ever NULL (ids and seqs of the held
    -- arrays, execution_seq NOT NULL), so NOT IN means what NOT EXISTS meant.
    AND (j.id, j.execution_seq::integer) NOT IN (SELECT h.id, h.seq FROM held h)
  RETURNING j.id, j.queue_id, j.execution_seq, j.attempt + 1 AS attempt, j.worker_id,
            j.claimed_at, j.started_at, j.status
),
stray_executions AS (
  INSERT INTO job_executions (job_id, queue_id, execution_seq, attempt, worker_id, status,
                              claimed_at, started_at, error)
  SELECT id, queue_id, execution_seq, attempt, worker_id, 'lost', claimed_at, started_at,
         'given back: leased to this worker, which did not hold it (its claim reply was lost)'
  FROM stray
),
doomed AS (
  -- dependants of strays that were cancelled can never run: cancel them (cancel_dependants)
  SELECT * FROM (
    WITH RECURSIVE d(id) AS (
      SELECT dep.job_id FROM job_dependencies dep
      WHERE dep.depends_on_id IN (SELECT id FROM stray WHERE status = 'cancelled')
      UNION
      -- LATERAL ... OFFSET 0: an index probe per job found, whatever the plan's estimates
      SELECT x.job_id FROM d CROSS JOIN LATERAL (
        SELECT dep.job_id FROM job_dependencies dep WHERE dep.depends_on_id = d.id OFFSET 0
      ) x
    ) SELECT id FROM d
  ) x
),
doomed_cancelled AS (
  UPDATE jobs j
  SET status = 'cancelled', finished_at = now(), updated_at = now(),
      last_error = 'a job it depends on was dead-lettered or cancelled'
  -- = ANY(ARRAY(...)): by primary key in the writer's kept (generic) plan too
  WHERE j.id = ANY(ARRAY(SELECT id FROM doomed)) AND j.status IN ('waiting', 'scheduled', 'queued')
),
woken AS (
  SELECT count(pg_notify('codity_jobs', q::text)) AS n
  FROM (SELECT DISTINCT queue_id AS q FROM stray WHERE status = 'queued') s
),
beat AS (
  -- A worker the sweep declared dead (say, after a network partition) that beats again is
  -- alive: show it so, with its uptime running again. Its old leases were reaped meanwhile and
  -- its stale writes stay fenced off.
  UPDATE workers SET last_heartbeat_at = now(), in_flight = $3::integer,
         lingering_threads = $6::integer,
         load_queue_ids = (SELECT l.queue_ids FROM load l),
         load_counts = (SELECT l.counts FROM load l),
         status = CASE WHEN status = 'dead' THEN 'active'::worker_status ELSE status END,
         stopped_at = CASE WHEN status = 'dead' THEN NULL ELSE stopped_at END
  WHERE id = $1::uuid
  RETURNING id
),
history AS (
  INSERT INTO worker_heartbeats AS h (worker_id, minute, beats, max_in_flight)
  SELECT id, date_trunc('minute', now()), 1, $3::integer FROM beat
  ON CONFLICT (worker_id, minute)
  DO UPDATE SET beats = h.beats + 1, max_in_flight = GREATEST(h.max_in_flight, EXCLUDED.max_in_flight)
  RETURNING 1
)
SELECT (SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM extended) AS extended,
       (SELECT coalesce(array_agg(execution_seq ORDER BY id), '{}') FROM extended) AS extended_seqs,
       (SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM extended
         WHERE cancel_requested_at IS NOT NULL) AS cancel_requested,
       (SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM stray) AS released,
       (SELECT n FROM woken) AS woken,
       (SELECT count(*) FROM history) AS beats;

-- name: report_progress
-- Parameters: $1 job id, $2 worker id, $3 execution_seq, $4 percent, $5 message.
UPDATE jobs
SET progress = $4::smallint, progress_message = $5::text, updated_at = now()
WHERE id = $1::bigint AND worker_id = $2::uuid AND execution_seq = $3::integer
  AND status IN ('claimed', 'running')
RETURNING id;

-- name: append_logs
-- Insert log lines only if the fence still holds; returns whether it did.
-- Parameters: $1 job id, $2 worker id, $3 execution_seq, $4 levels text[], $5 messages text[],
-- $6 fields jsonb[], $7 timestamps timestamptz[] (NULL = now).
WITH fenced AS (
  SELECT id, execution_seq FROM jobs
  WHERE id = $1::bigint AND worker_id = $2::uuid AND execution_seq = $3::integer
    AND status IN ('claimed', 'running')
),
written AS (
  INSERT INTO job_logs (job_id, execution_seq, level, message, fields, created_at)
  SELECT f.id, f.execution_seq, l.level, l.message, coalesce(l.fields, '{}'::jsonb),
         coalesce(l.at, now())
  FROM fenced f, unnest($4::text[], $5::text[], $6::jsonb[], $7::timestamptz[])
       AS l(level, message, fields, at)
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM fenced) AS held, (SELECT count(*) FROM written) AS written;
