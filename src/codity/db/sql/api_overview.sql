-- A project at a glance: job totals, queues, workers, dead letters and scheduler health.
-- Each statement reads the project's queue ids itself (an InitPlan), so each names the tenant.

-- name: api_overview_totals
-- Jobs per status: per queue, a grouped count that streams idx_jobs_queue_status_id in
-- (queue_id, status) order (an index-only GroupAggregate, no hash, no parallel workers), then
-- summed over the project's queues. A join on queues, or one count over `queue_id = ANY(...)`,
-- let the planner hash the rows instead: 80-110 ms against ~20 ms at 100,000 jobs per project
-- (`codity bench reads`). Parameters: :project_id uuid.
SELECT s.status, sum(s.n)::bigint AS n
FROM queues q
CROSS JOIN LATERAL (
  SELECT j.status::text AS status, count(*) AS n
  FROM jobs j WHERE j.queue_id = q.id GROUP BY j.status
) s
WHERE q.project_id = :project_id::uuid
GROUP BY s.status;

-- name: api_overview_queues
-- How many queues, and how many of them are paused. Parameters: :project_id uuid.
SELECT count(*) AS total, count(*) FILTER (WHERE is_paused) AS paused
FROM queues WHERE project_id = :project_id::uuid;

-- name: api_overview_workers
-- Workers serving at least one of the project's queues, per status.
SELECT w.status::text AS status, count(DISTINCT w.id) AS n
FROM workers w JOIN worker_queues wq ON wq.worker_id = w.id
WHERE wq.queue_id = ANY(ARRAY(SELECT id FROM queues WHERE project_id = :project_id::uuid))
GROUP BY w.status;

-- name: api_overview_dead_letters
-- Dead letters not replayed yet (ix_dead_letter_jobs_queue_pending).
SELECT count(*) FROM dead_letter_jobs
WHERE queue_id = ANY(ARRAY(SELECT id FROM queues WHERE project_id = :project_id::uuid))
  AND replayed_at IS NULL;

-- name: api_overview_health
-- The oldest claimable job (on an unpaused queue), and how overdue the scheduler is: the
-- promoter should have moved every due `scheduled` job, the cron loop every due enabled
-- schedule. Parameters: :project_id uuid.
SELECT
  (SELECT extract(epoch FROM now() - min(j.run_at))
   FROM jobs j JOIN queues q ON q.id = j.queue_id
   WHERE j.queue_id = ANY(ARRAY(SELECT id FROM queues WHERE project_id = :project_id::uuid)) AND j.status = 'queued'
     AND j.run_at <= now() AND NOT q.is_paused) AS oldest_queued_age_s,
  greatest(
    (SELECT extract(epoch FROM now() - min(run_at)) FROM jobs
     WHERE queue_id = ANY(ARRAY(SELECT id FROM queues WHERE project_id = :project_id::uuid)) AND status = 'scheduled' AND run_at <= now()),
    (SELECT extract(epoch FROM now() - min(next_run_at)) FROM scheduled_jobs
     WHERE queue_id = ANY(ARRAY(SELECT id FROM queues WHERE project_id = :project_id::uuid)) AND enabled AND next_run_at <= now())
  ) AS scheduler_lag_s;
