-- name: claim_jobs
-- The claim: hand up to $4 queued jobs of queue $3 to worker $1 with a lease of $2 ms.
-- FOR UPDATE SKIP LOCKED is the whole mechanism: a concurrent claimer skips rows another
-- claimer has locked instead of waiting for them or reading them twice, so no job is handed out
-- twice. The inner ORDER BY matches idx_jobs_claim (queue_id, priority DESC, run_at, id)
-- WHERE status = 'queued' term for term, so the plan is Limit -> LockRows -> index scan with
-- no Sort node. `attempt` is accounting (refunded on reap/drain); `execution_seq` is the
-- monotonic identity of this attempt and, with worker_id, the fence every later write names.
-- Parameters: $1 worker_id uuid, $2 lease_ms integer, $3 queue_id uuid, $4 limit integer.
UPDATE jobs j
SET status = 'claimed',
    worker_id = $1::uuid,
    claimed_at = now(),
    started_at = NULL,
    lock_expires_at = now() + $2::integer * interval '1 millisecond',
    attempt = j.attempt + 1,
    execution_seq = j.execution_seq + 1,
    updated_at = now()
FROM (
  SELECT j2.id FROM jobs j2
  JOIN queues q ON q.id = j2.queue_id
  WHERE j2.queue_id = $3::uuid AND j2.status = 'queued'
    AND j2.run_at <= now() AND q.is_paused = false
  ORDER BY j2.priority DESC, j2.run_at ASC, j2.id ASC
  FOR UPDATE OF j2 SKIP LOCKED
  LIMIT $4::integer
) sel
WHERE j.id = sel.id
RETURNING j.id, j.queue_id, j.handler, j.payload, j.attempt, j.max_attempts, j.execution_seq,
          j.timeout_ms, j.lock_expires_at, j.priority;

-- name: claim_queues_info
-- What the claimer needs to know about the queues it serves, best queue first.
-- Parameters: $1 queue ids uuid[].
SELECT id, priority, concurrency_limit, is_paused
FROM queues
WHERE id = ANY($1::uuid[])
ORDER BY priority DESC, id;

-- name: lock_queue_for_claim
-- Concurrency-limited queues: take the queue row's lock in its own statement, so the count that
-- follows (a new statement, hence a fresh snapshot) sees every claim committed by whoever held
-- the lock before us. SKIP LOCKED alone cannot count; this serialises claimers of one queue.
-- Parameters: $1 queue_id uuid.
SELECT concurrency_limit, is_paused FROM queues WHERE id = $1::uuid FOR UPDATE;

-- name: count_leased_in_queue
-- Jobs holding a slot of the queue's concurrency limit (claimed or running, any worker).
-- Parameters: $1 queue_id uuid.
SELECT count(*) FROM jobs WHERE queue_id = $1::uuid AND status IN ('claimed', 'running');
