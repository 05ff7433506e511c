-- The chart rollups (docs/DASHBOARD.md, "Charts"): the scheduler's stats loop turns each closed
-- minute of job_executions into a few rows of queue_stats / handler_stats / worker_stats, and
-- each closed quarter and hour of minute rows into a quarter row and an hour row. Charts read
-- only these tables: at most ~170 rows per queue whatever the window.

-- name: lock_rollup_watermark
-- The watermark row of one rollup, locked for this transaction; SKIP LOCKED so a second
-- scheduler replica finds nothing and leaves the minute to the first. Parameters: $1 name.
SELECT done_until FROM stats_rollup_state WHERE name = $1::text FOR UPDATE SKIP LOCKED;

-- name: init_rollup_watermark
-- First run: start from the given minute (history before the rollup existed is not charted).
-- Parameters: $1 name, $2 first minute to roll up.
INSERT INTO stats_rollup_state (name, done_until) VALUES ($1::text, $2::timestamptz)
ON CONFLICT (name) DO NOTHING;

-- name: advance_rollup_watermark
-- Parameters: $1 name, $2 new done_until.
UPDATE stats_rollup_state SET done_until = $2::timestamptz WHERE name = $1::text;

-- name: minute_executions
-- Attempts that ended in one minute, grouped to the granularity the rollup tables keep:
-- queue, handler, worker, outcome, and the histogram slots of their run time and wait.
-- The scan is one index range per queue (ix_job_executions_queue_finished), never the whole
-- history. Wait = handler start (or claim) - the job's run_at, counted only for the job's
-- latest attempt (earlier attempts' run_at is not kept).
-- Parameters: $1 minute start, $2 ln(MIN_MS), $3 ln(MAX_MS), $4 buckets.
SELECT e.queue_id, j.handler, e.worker_id,
       count(*) FILTER (WHERE e.status = 'completed') AS completed,
       count(*) FILTER (WHERE e.status IN ('failed', 'timed_out')) AS failed,
       CASE WHEN e.started_at IS NOT NULL THEN
         width_bucket(ln(greatest(extract(epoch FROM e.finished_at - e.started_at) * 1000, 0.0001)),
                      $2::float8, $3::float8, $4::integer)
       END AS run_slot,
       CASE WHEN e.execution_seq = j.execution_seq
                 AND coalesce(e.started_at, e.claimed_at) IS NOT NULL THEN
         width_bucket(ln(greatest(extract(epoch FROM coalesce(e.started_at, e.claimed_at) - j.run_at)
                                  * 1000, 0.0001)),
                      $2::float8, $3::float8, $4::integer)
       END AS wait_slot,
       count(*) AS n
FROM queues q
JOIN LATERAL (
  SELECT * FROM job_executions e
  WHERE e.queue_id = q.id
    AND e.finished_at >= $1::timestamptz AND e.finished_at < $1::timestamptz + interval '1 minute'
    AND e.status IN ('completed', 'failed', 'timed_out')
) e ON true
JOIN jobs j ON j.id = e.job_id
GROUP BY 1, 2, 3, 6, 7;

-- name: queue_depth_sample
-- Every queue's backlog and running count right now (idx_jobs_queue_status_id, per queue).
SELECT q.id AS queue_id,
       (SELECT count(*) FROM jobs j WHERE j.queue_id = q.id
          AND j.status IN ('waiting', 'scheduled', 'queued')) AS depth,
       (SELECT count(*) FROM jobs j WHERE j.queue_id = q.id
          AND j.status IN ('claimed', 'running')) AS running
FROM queues q;

-- name: in_flight_sample
-- Leased jobs per worker and queue right now (idx_jobs_worker_leased is small: leased only).
SELECT worker_id, queue_id, count(*) AS in_flight FROM jobs
WHERE status IN ('claimed', 'running') AND worker_id IS NOT NULL
GROUP BY 1, 2;

-- name: upsert_queue_stats
-- Parameters: arrays of queue_id, depth, running, completed, failed, wait_hist (as text
-- '{...}' literals, since a 2-D array cannot be unnested row by row); $7 grain; $8 bucket.
INSERT INTO queue_stats (queue_id, grain, bucket, depth, running, completed, failed, wait_hist)
SELECT t.queue_id, $7::smallint, $8::timestamptz, t.depth, t.running, t.completed, t.failed,
       t.wait_hist::integer[]
FROM unnest($1::uuid[], $2::integer[], $3::integer[], $4::integer[], $5::integer[], $6::text[])
  AS t(queue_id, depth, running, completed, failed, wait_hist)
WHERE EXISTS (SELECT 1 FROM queues q WHERE q.id = t.queue_id)
ON CONFLICT (queue_id, grain, bucket) DO UPDATE
SET depth = EXCLUDED.depth, running = EXCLUDED.running, completed = EXCLUDED.completed,
    failed = EXCLUDED.failed, wait_hist = EXCLUDED.wait_hist;

-- name: upsert_handler_stats
-- Parameters: arrays of queue_id, handler, completed, failed, run_hist (text); $6 grain; $7 bucket.
INSERT INTO handler_stats (queue_id, handler, grain, bucket, completed, failed, run_hist)
SELECT t.queue_id, t.handler, $6::smallint, $7::timestamptz, t.completed, t.failed,
       t.run_hist::integer[]
FROM unnest($1::uuid[], $2::text[], $3::integer[], $4::integer[], $5::text[])
  AS t(queue_id, handler, completed, failed, run_hist)
WHERE EXISTS (SELECT 1 FROM queues q WHERE q.id = t.queue_id)
ON CONFLICT (queue_id, grain, bucket, handler) DO UPDATE
SET completed = EXCLUDED.completed, failed = EXCLUDED.failed, run_hist = EXCLUDED.run_hist;

-- name: upsert_worker_stats
-- Parameters: arrays of queue_id, worker_id, completed, failed, in_flight; $6 grain; $7 bucket.
INSERT INTO worker_stats (queue_id, worker_id, grain, bucket, completed, failed, in_flight)
SELECT t.queue_id, t.worker_id, $6::smallint, $7::timestamptz, t.completed, t.failed, t.in_flight
FROM unnest($1::uuid[], $2::uuid[], $3::integer[], $4::integer[], $5::integer[])
  AS t(queue_id, worker_id, completed, failed, in_flight)
WHERE EXISTS (SELECT 1 FROM queues q WHERE q.id = t.queue_id)
  AND EXISTS (SELECT 1 FROM workers w WHERE w.id = t.worker_id)
ON CONFLICT (queue_id, grain, bucket, worker_id) DO UPDATE
SET completed = EXCLUDED.completed, failed = EXCLUDED.failed, in_flight = EXCLUDED.in_flight;

-- name: span_queue_rows
-- The minute rows of one span (a quarter or an hour), to be summed into its row.
-- Parameters: $1 span start, $2 span length in minutes.
SELECT queue_id, bucket, depth, running, completed, failed, wait_hist FROM queue_stats
WHERE grain = 1 AND bucket >= $1::timestamptz AND bucket < $1::timestamptz + $2::integer * interval '1 minute';

-- name: span_handler_rows
-- Parameters: $1 span start, $2 span length in minutes.
SELECT queue_id, handler, completed, failed, run_hist FROM handler_stats
WHERE grain = 1 AND bucket >= $1::timestamptz AND bucket < $1::timestamptz + $2::integer * interval '1 minute';

-- name: span_worker_rows
-- Parameters: $1 span start, $2 span length in minutes.
SELECT queue_id, worker_id, bucket, completed, failed, in_flight FROM worker_stats
WHERE grain = 1 AND bucket >= $1::timestamptz AND bucket < $1::timestamptz + $2::integer * interval '1 minute';

-- name: prune_stats
-- Retention of the rollups themselves: minute and quarter rows for $1, hour rows for $2 (a few
-- thousand rows per queue at most, so one statement per table is short).
WITH q AS (
  DELETE FROM queue_stats WHERE (grain IN (1, 15) AND bucket < $1::timestamptz)
     OR (grain = 60 AND bucket < $2::timestamptz) RETURNING 1
), h AS (
  DELETE FROM handler_stats WHERE (grain IN (1, 15) AND bucket < $1::timestamptz)
     OR (grain = 60 AND bucket < $2::timestamptz) RETURNING 1
), w AS (
  DELETE FROM worker_stats WHERE (grain IN (1, 15) AND bucket < $1::timestamptz)
     OR (grain = 60 AND bucket < $2::timestamptz) RETURNING 1
)
SELECT (SELECT count(*) FROM q) + (SELECT count(*) FROM h) + (SELECT count(*) FROM w) AS pruned;
