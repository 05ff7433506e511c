-- name: reap_expired
-- The reaper: leases that ran out (the worker vanished, or stalled past its lease) go back to
-- 'queued' with the attempt REFUNDED: a SIGKILLed worker is an infrastructure failure, not a job
-- failure, so three rolling deploys must not dead-letter a healthy job. A job whose cancel had
-- been requested is cancelled instead. Each vanished attempt gets its 'lost' execution row.
-- SKIP LOCKED: several scheduler replicas can reap at once without stepping on each other.
-- The expired leases are found among every leased job (idx_jobs_worker_leased: as many as the
-- fleet's capacity, whatever the backlog or the history) and sorted here; the expiry has no
-- index of its own, so a heartbeat's extension is a HOT update (migration 0034).
-- Parameters: $1 limit integer.
WITH expired AS (
  SELECT id FROM jobs
  WHERE status IN ('claimed', 'running') AND lock_expires_at < now()
  ORDER BY lock_expires_at
  LIMIT $1::integer
  FOR UPDATE SKIP LOCKED
),
back AS (
  UPDATE jobs j
  SET status = (CASE WHEN j.cancel_requested_at IS NULL THEN 'queued' ELSE 'cancelled' END)::job_status,
      attempt = GREATEST(j.attempt - 1, 0),
      lock_expires_at = NULL,
      finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL ELSE now() END,
      progress = NULL, progress_message = NULL, updated_at = now()
  FROM expired e
  WHERE j.id = e.id
  RETURNING j.id, j.queue_id, j.execution_seq, j.attempt + 1 AS attempt, j.worker_id,
            j.claimed_at, j.started_at, j.status::text AS status
),
executions AS (
  INSERT INTO job_executions (job_id, queue_id, execution_seq, attempt, worker_id, status,
                              claimed_at, started_at, error)
  SELECT id, queue_id, execution_seq, attempt, worker_id, 'lost', claimed_at, started_at,
         'lease expired: the worker stopped heartbeating'
  FROM back
)
SELECT id, queue_id, status FROM back ORDER BY id;

-- name: promote_due
-- The promoter: scheduled jobs whose run_at has come become claimable. SKIP LOCKED so replicas
-- share the work. Parameters: $1 limit integer.
WITH due AS (
  SELECT id FROM jobs
  WHERE status = 'scheduled' AND run_at <= now()
  ORDER BY run_at
  LIMIT $1::integer
  FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET status = 'queued', updated_at = now()
FROM due WHERE j.id = due.id
RETURNING j.id, j.queue_id;

-- name: sweep_dead_workers
-- Workers whose heartbeat went stale are marked dead; stopped_at freezes their uptime.
-- Their leases are left to the reaper, which works from lock_expires_at.
-- Parameters: $1 dead_after_ms integer.
UPDATE workers
SET status = 'dead', stopped_at = now()
WHERE status IN ('active', 'draining')
  AND last_heartbeat_at < now() - $1::integer * interval '1 millisecond'
RETURNING id;

-- name: prune_jobs
-- Retention: delete finished jobs older than $1, $2 at a time (small batches keep locks and
-- WAL bursts short). Executions and logs cascade; dead letters keep their own copy.
WITH doomed AS (
  SELECT id FROM jobs
  WHERE finished_at IS NOT NULL AND finished_at < $1::timestamptz
    AND status IN ('completed', 'cancelled', 'dead_letter')
  ORDER BY finished_at
  LIMIT $2::integer
  FOR UPDATE SKIP LOCKED
)
DELETE FROM jobs j USING doomed WHERE j.id = doomed.id;

-- name: prune_logs
-- Parameters: $1 older than timestamptz, $2 batch integer.
DELETE FROM job_logs WHERE id IN (
  SELECT id FROM job_logs WHERE created_at < $1::timestamptz ORDER BY created_at LIMIT $2::integer
);

-- name: prune_heartbeats
-- Parameters: $1 older than timestamptz, $2 batch integer.
DELETE FROM worker_heartbeats WHERE (worker_id, minute) IN (
  SELECT worker_id, minute FROM worker_heartbeats WHERE minute < $1::timestamptz
  ORDER BY minute LIMIT $2::integer
);

-- name: prune_rate_windows
-- Claim rate-limit windows that count nothing any more: every start they recorded has left the
-- window at $1 (the newest slot is more than 50 slots old), or the queue has no rate limit now.
-- A claim writes the row again when it needs one; a window read while absent counts zero, which
-- is what an expired one counts anyway. Parameters: $1 now timestamptz, $2 batch integer.
DELETE FROM queue_rate_windows w
WHERE (w.queue_id, w.key) IN (
  SELECT r.queue_id, r.key
  FROM queue_rate_windows r JOIN queues q ON q.id = r.queue_id
  WHERE q.rate_limit_period_ms IS NULL
     OR r.slot < codity_rate_slot($1::timestamptz, q.rate_limit_period_ms) - 50
  LIMIT $2::integer
  FOR UPDATE OF r SKIP LOCKED
);

-- name: due_schedules
-- Cron: due schedules, claimed with SKIP LOCKED so concurrent scheduler replicas each take
-- different ones (no leader election). Held until this transaction commits.
-- With the project and organisation whose enqueue quotas a firing counts against.
-- Parameters: $1 now timestamptz, $2 limit integer.
SELECT s.id, s.queue_id, s.cron_expression, s.timezone, s.handler, s.payload, s.priority,
       s.next_run_at, q.project_id, p.org_id
FROM scheduled_jobs s
JOIN queues q ON q.id = s.queue_id
JOIN projects p ON p.id = q.project_id
WHERE s.enabled AND s.next_run_at <= $1::timestamptz
ORDER BY s.next_run_at
LIMIT $2::integer
FOR UPDATE OF s SKIP LOCKED;

-- name: advance_schedule
-- Parameters: $1 schedule id, $2 next_run_at, $3 last_run_at, $4 last_job_id.
UPDATE scheduled_jobs
SET next_run_at = $2::timestamptz, last_run_at = $3::timestamptz,
    last_job_id = COALESCE($4::bigint, last_job_id), updated_at = now()
WHERE id = $1::uuid;

-- name: disable_schedule
-- A stored expression that no longer parses: stop firing it rather than fail every tick.
UPDATE scheduled_jobs SET enabled = false, updated_at = now() WHERE id = $1::uuid;
