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
-- ONE statement per worker per beat: extend every lease it holds, refresh the worker's
-- denormalised last_heartbeat_at, and bump the compact per-minute history row. Returns how
-- many leases were extended and which of those jobs an operator asked to cancel.
-- Parameters: $1 worker_id uuid, $2 lease_ms integer, $3 in_flight integer.
WITH extended AS (
  UPDATE jobs
  SET lock_expires_at = now() + $2::integer * interval '1 millisecond'
  WHERE worker_id = $1::uuid AND status IN ('claimed', 'running')
  RETURNING id, cancel_requested_at
),
beat AS (
  -- A worker the sweep declared dead (say, after a network partition) that beats again is
  -- alive: show it so, with its uptime running again. Its old leases were reaped meanwhile and
  -- its stale writes stay fenced off.
  UPDATE workers SET last_heartbeat_at = now(), in_flight = $3::integer,
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
SELECT (SELECT count(*) FROM extended) AS extended,
       (SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM extended
         WHERE cancel_requested_at IS NOT NULL) AS cancel_requested,
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
