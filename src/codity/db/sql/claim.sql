-- name: claim_jobs
-- The claim: hand up to $4 queued jobs of the queues $3 to worker $1 with a lease of $2 ms, in
-- ONE statement (one round trip) for every queue the worker serves. Three steps, each a CTE:
--
-- 1. queue_order: the queues to serve, best first (queues.priority DESC, id), paused queues
--    left out: pauses are read here, inside the claim, never in a query before it. The order
--    comes from an ordered aggregate over the handful of queue rows, so no Sort node appears.
--    Each queue carries the claimer's cursor for it ($5-$7, see 3).
-- 2. quota: how many jobs each queue may hand out now. Unlimited queues: $4. A queue with a
--    concurrency limit: its row is locked FOR UPDATE first (claimers of that queue take turns),
--    then codity_leased_in_queue() counts its leased jobs with a FRESH snapshot (a VOLATILE
--    function), so the count sees every claim committed by the previous holder of the lock;
--    the statement's own snapshot, taken before the wait, would not (over-admission).
-- 3. candidates: CANDIDATE SELECTION, per queue, in queue order: FOR UPDATE SKIP LOCKED under
--    LIMIT quota, in the order of idx_jobs_claim (queue_id, priority DESC, run_at, id)
--    WHERE status = 'queued' term for term: Limit -> LockRows -> Index Scan, no Sort. The outer
--    LIMIT $4 stops pulling once it has enough, so a later queue is not even read (or locked)
--    when an earlier one filled the claim. Flow control (fair shares, concurrency keys, rate
--    limits) extends this step: it decides which queued rows are eligible and in what order.
--    THE CURSOR: the index entries of jobs already claimed stay in idx_jobs_claim, pointing at
--    dead rows, until vacuum removes them; while a long transaction holds an old snapshot it
--    cannot, and every claim would step over all of them from the front of the index. So the
--    scan of a queue is three index ranges, in index order: priorities above the cursor's,
--    the cursor's priority strictly after its (run_at, id) (the key of the last job this
--    claimer took there), and lower priorities. The claimer drops the cursor ($5 NULL: one
--    full scan) every so often, which picks up jobs that came back with an older key
--    (released, reaped, promoted) - see worker.producer.
--
-- Then the UPDATE: queued -> claimed. SKIP LOCKED is the whole no-double-handout mechanism: a
-- concurrent claimer skips rows another claimer has locked instead of waiting for them or
-- reading them twice. `attempt` is accounting (refunded on reap/drain); `execution_seq` is the
-- monotonic identity of this attempt and, with worker_id, the fence every later write names.
-- RETURNING carries the queue's position and the job's sort keys, so the caller can put the
-- rows in claim order (and move its cursors) without a Sort node here.
-- Parameters: $1 worker_id uuid, $2 lease_ms integer, $3 queue ids uuid[], $4 limit integer,
-- $5 cursor priorities integer[], $6 cursor run_at timestamptz[], $7 cursor ids bigint[]
-- (aligned with $3; NULL arrays or NULL elements: no cursor, scan the queue from the front).
WITH cursors AS (
  SELECT c.id, c.p, c.r, c.i
  FROM unnest($3::uuid[], $5::integer[], $6::timestamptz[], $7::bigint[]) AS c(id, p, r, i)
),
queue_order AS (
  SELECT o.id, o.pos,
         -- no cursor: nothing above or at a priority no job can have; all of it "below"
         COALESCE(c.p, 32768) AS cp, COALESCE(c.r, '-infinity') AS cr, COALESCE(c.i, 0) AS ci
  FROM (SELECT array_agg(q.id ORDER BY q.priority DESC, q.id) AS ids
        FROM queues q WHERE q.id = ANY($3::uuid[]) AND NOT q.is_paused) s
  CROSS JOIN LATERAL unnest(s.ids) WITH ORDINALITY AS o(id, pos)
  LEFT JOIN cursors c ON c.id = o.id AND c.p IS NOT NULL
),
limited AS (
  -- Locked in queue order (the same for every claimer), one queue at a time; the count runs
  -- above the lock, so it is taken after the lock is held.
  SELECT l.id, l.concurrency_limit - codity_leased_in_queue(l.id) AS free
  FROM queue_order o
  CROSS JOIN LATERAL (
    SELECT q.id, q.concurrency_limit FROM queues q
    WHERE q.id = o.id AND q.concurrency_limit IS NOT NULL
    FOR UPDATE OF q
  ) l
),
quota AS (
  SELECT o.id, o.pos, o.cp, o.cr, o.ci,
         GREATEST(COALESCE(LEAST(l.free, $4::integer), $4::integer), 0) AS n
  FROM queue_order o LEFT JOIN limited l ON l.id = o.id
),
candidates AS (
  SELECT c.id, q.pos
  FROM quota q
  CROSS JOIN LATERAL (
    SELECT above.id FROM (
      SELECT j2.id FROM jobs j2
      WHERE j2.queue_id = q.id AND j2.status = 'queued' AND j2.run_at <= now()
        AND j2.priority > q.cp
      ORDER BY j2.priority DESC, j2.run_at ASC, j2.id ASC
      LIMIT q.n
      FOR UPDATE OF j2 SKIP LOCKED
    ) above
    UNION ALL
    SELECT at_cursor.id FROM (
      SELECT j2.id FROM jobs j2
      WHERE j2.queue_id = q.id AND j2.status = 'queued' AND j2.run_at <= now()
        AND j2.priority = q.cp AND (j2.run_at, j2.id) > (q.cr, q.ci)
      ORDER BY j2.priority DESC, j2.run_at ASC, j2.id ASC
      LIMIT q.n
      FOR UPDATE OF j2 SKIP LOCKED
    ) at_cursor
    UNION ALL
    SELECT below.id FROM (
      SELECT j2.id FROM jobs j2
      WHERE j2.queue_id = q.id AND j2.status = 'queued' AND j2.run_at <= now()
        AND j2.priority < q.cp
      ORDER BY j2.priority DESC, j2.run_at ASC, j2.id ASC
      LIMIT q.n
      FOR UPDATE OF j2 SKIP LOCKED
    ) below
    LIMIT q.n
  ) c
  LIMIT $4::integer
)
UPDATE jobs j
SET status = 'claimed',
    worker_id = $1::uuid,
    claimed_at = now(),
    started_at = NULL,
    lock_expires_at = now() + $2::integer * interval '1 millisecond',
    attempt = j.attempt + 1,
    execution_seq = j.execution_seq + 1,
    updated_at = now()
FROM candidates sel
WHERE j.id = sel.id
RETURNING j.id, j.queue_id, j.handler, j.payload, j.attempt, j.max_attempts, j.execution_seq,
          j.timeout_ms, j.lock_expires_at, j.priority, j.run_at, sel.pos, j.trace_parent;
