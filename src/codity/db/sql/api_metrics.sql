-- /metrics: the numbers of a Prometheus scrape, read from the database (the API runs no job).

-- name: api_metrics_queues
SELECT id, name, is_paused FROM queues ORDER BY name;

-- name: api_metrics_depth
SELECT queue_id, status::text AS status, count(*) AS n FROM jobs GROUP BY 1, 2;

-- name: api_metrics_workers
SELECT status::text AS status, count(*) AS n FROM workers GROUP BY 1;

-- name: api_metrics_executions
SELECT queue_id,
       count(*) FILTER (WHERE started_at IS NOT NULL) AS started,
       count(*) FILTER (WHERE status = 'completed') AS completed,
       count(*) FILTER (WHERE status IN ('failed', 'timed_out')) AS failed,
       count(*) FILTER (WHERE status = 'lost') AS lost
FROM job_executions GROUP BY queue_id;

-- name: api_metrics_running
-- Attempts running right now have started but have no execution row yet.
SELECT queue_id, count(*) AS n FROM jobs WHERE status = 'running' GROUP BY 1;

-- name: api_metrics_dead_lettered
SELECT queue_id, count(*) AS n FROM dead_letter_jobs GROUP BY 1;

-- name: api_metrics_claim_to_start
-- width_bucket gives, per sample, how many bucket bounds lie at or below it; the histogram is
-- cumulated in Python: one grouped scan per histogram instead of one count per bucket.
-- Parameters: :bounds float8[] (seconds).
SELECT width_bucket(s, :bounds::float8[]) AS bucket, count(*) AS n, coalesce(sum(s), 0) AS total
FROM (SELECT extract(epoch FROM started_at - claimed_at)::float8 AS s FROM job_executions
      WHERE claimed_at IS NOT NULL AND started_at IS NOT NULL AND started_at >= claimed_at) d
GROUP BY 1;

-- name: api_metrics_run
-- As api_metrics_claim_to_start, for started_at -> finished_at.
SELECT width_bucket(s, :bounds::float8[]) AS bucket, count(*) AS n, coalesce(sum(s), 0) AS total
FROM (SELECT extract(epoch FROM finished_at - started_at)::float8 AS s FROM job_executions
      WHERE started_at IS NOT NULL AND finished_at IS NOT NULL AND finished_at >= started_at) d
GROUP BY 1;
