-- name: claim_jobs
-- The claim: hand up to $4 queued jobs of the queues $3 to worker $1 with a lease of $2 ms, in
-- ONE statement (one round trip) for every queue the worker serves. Three steps, each a CTE:
--
-- 1. queue_order: the queues to serve, best first (queues.priority DESC, id), paused queues
--    left out: pauses are read here, inside the claim, never in a query before it. The order
--    comes from an ordered aggregate over the handful of queue rows, so no Sort node appears.
--    Each queue carries the claimer's cursor for it ($5-$7, see 3). Queues with flow control
--    (a key limit or a rate limit) are left out, and counted: claim_jobs_flow serves them.
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
--    limits) is claim_jobs_flow's, below.
--    THE CURSOR: the index entries of jobs already claimed stay in idx_jobs_claim, pointing at
--    dead rows, until vacuum removes them; while a long transaction holds an old snapshot it
--    cannot, and every claim would step over all of them from the front of the index. So the
--    scan of a queue is three index ranges, in index order: priorities above the cursor's,
--    the cursor's priority strictly after its (run_at, id) (the key of the last job this
--    claimer took there, or just behind the clock of its claim that found the queue dry),
--    and lower priorities. The claimer drops the cursor ($5 NULL: one full scan) every so
--    often, which picks up jobs that came back with an older key (released, reaped,
--    promoted) - see worker.producer and core.claim.advance_cursors.
--
-- Then the UPDATE (`claimed`): queued -> claimed. SKIP LOCKED is the whole no-double-handout mechanism: a
-- concurrent claimer skips rows another claimer has locked instead of waiting for them or
-- reading them twice. `attempt` is accounting (refunded on reap/drain); `execution_seq` is the
-- monotonic identity of this attempt and, with worker_id, the fence every later write names.
-- RETURNING carries the queue's position and the job's sort keys, so the caller can put the
-- rows in claim order (and move its cursors) without a Sort node here. run_at goes as whole
-- microseconds since the Unix epoch (exact: extract gives a numeric): the worker decodes an
-- integer per job instead of a timestamptz (a datetime built per value, about a third of the
-- decoding of a claim's reply), and makes a datetime only of the one run_at per queue its
-- cursor needs. Its first 12 columns are read by position (core/claim.py: _job,
-- _claim_order), in the same order in both claim statements.
-- Last, one report row (id NULL), empty claims included: how many queues were left out for
-- flow control (flow_queues: the caller then claims from them with claim_jobs_flow,
-- core/claim.py), the claim's clock, and each queue's quota, from which the caller tells which
-- queues ran dry (it moves their cursors: core.claim.advance_cursors) and whether the claim
-- drained every queue (nothing left that a freed slot could claim).
-- Parameters: $1 worker_id uuid, $2 lease_ms integer, $3 queue ids uuid[], $4 limit integer,
-- $5 cursor priorities integer[], $6 cursor run_at timestamptz[], $7 cursor ids bigint[]
-- (aligned with $3; NULL arrays or NULL elements: no cursor, scan the queue from the front).
WITH claimer AS (
  -- The claimer is a registered worker: checked once per claim, with the row lock a foreign
  -- key would take for every claimed row (migration 0015).
  SELECT codity_require_worker($1::uuid) AS ok
),
cursors AS (
  SELECT c.id, c.p, c.r, c.i
  FROM unnest($3::uuid[], $5::integer[], $6::timestamptz[], $7::bigint[]) AS c(id, p, r, i)
),
served AS (
  SELECT array_agg(q.id ORDER BY q.priority DESC, q.id)
           FILTER (WHERE q.key_concurrency_limit IS NULL AND q.rate_limit_count IS NULL) AS ids,
         count(*) FILTER (WHERE q.key_concurrency_limit IS NOT NULL
                             OR q.rate_limit_count IS NOT NULL) AS flow_queues
  FROM claimer w, queues q WHERE w.ok AND q.id = ANY($3::uuid[]) AND NOT q.is_paused
),
queue_order AS (
  SELECT o.id, o.pos,
         -- no cursor: nothing above or at a priority no job can have; all of it "below"
         COALESCE(c.p, 32768) AS cp, COALESCE(c.r, '-infinity') AS cr, COALESCE(c.i, 0) AS ci
  FROM served s
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
),
claimed AS (
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
  -- = ANY(ARRAY(...)): the UPDATE finds its rows by primary key in a generic plan too (the
  -- worker keeps this statement's plan: worker.connection), instead of a hash join over an
  -- estimated fraction of the table.
  WHERE j.id = sel.id AND j.id = ANY(ARRAY(SELECT c.id FROM candidates c))
  RETURNING j.id, j.queue_id, j.handler, j.payload, j.attempt, j.max_attempts, j.execution_seq,
            j.timeout_ms, j.priority, (extract(epoch FROM j.run_at) * 1000000)::bigint AS run_at_us,
            sel.pos, j.trace_parent
)
SELECT c.id, c.queue_id, c.handler, c.payload, c.attempt, c.max_attempts, c.execution_seq,
       c.timeout_ms, c.priority, c.run_at_us, c.pos, c.trace_parent,
       NULL::bigint AS flow_queues, NULL::timestamptz AS scanned_at,
       NULL::uuid[] AS quota_ids, NULL::integer[] AS quotas
FROM claimed c
UNION ALL
-- The report row (id NULL), after the UPDATE: how many queues were left out for flow control,
-- the claim's clock, and each served queue's quota (aligned arrays). From the quotas and the
-- jobs claimed of each queue, core.claim works out (claim_report):
-- ran_dry: when the claim did not fill $4, every queue was read to the end of its ranges, and
-- those that had room (quota > 0) but gave no job have nothing queued after the cursor (as of
-- this statement's snapshot); none when it filled $4 (a later queue may not have been read at
-- all). A queue at its concurrency limit (quota 0) is not in it: its queued jobs were not
-- looked for.
-- drained: the claim did not fill $4 and every queue served gave fewer jobs than its quota, so
-- none has a claimable job left (as of this snapshot) and none is held back by its concurrency
-- limit. A slot freed in the worker then cannot make a job claimable; only an enqueue (its
-- NOTIFY) or the poll can, and the producer does not claim again on a freed slot
-- (worker.producer: an empty claim per finished job held up the next job's claim).
-- Both were subqueries over `claimed` and `quota` here; their start-up alone was about a tenth
-- of a one-job claim's server instructions (docs/DESIGN_DECISIONS.md, ADR-22).
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       s.flow_queues, now(), q.ids, q.quotas
FROM served s,
     -- empty arrays, not NULL, when no queue is served (all paused): still this statement's report
     (SELECT COALESCE(array_agg(id), '{}') AS ids, COALESCE(array_agg(n), '{}') AS quotas
      FROM quota) q;

-- name: claim_jobs_flow
-- The claim for queues with flow control (docs/CONCURRENCY.md): the steps of claim_jobs, with
-- every queue of the worker served in one statement (plain ones too, in the same order), plus:
-- * settings: the key and rate limits of the worker's queues that have them;
-- * a queue with a queue-wide rate limit is locked like a limited queue (`limited`), and
--   rated caps its quota by the starts left in its window, read by codity_rate_window()
--   with a fresh snapshot after the lock; unless ($10) its window has room for ten claims
--   of this size or more (codity_rate_room, read without the lock): then it is claimed
--   without the lock, up to $4, and the debit below fails the claim (serialization_failure,
--   rolled back whole) if that puts its window over the limit; core.Claimer then claims
--   again with $10 false (migration 0030);
-- * shares: fair shares between projects ($5, set by a worker whose queues span several
--   projects): codity_fair_shares() splits $4 between the projects with work in proportion to
--   their weight, against what each already has leased (from what the claimer holds, $9, and
--   the other workers published; counted in `jobs` when $9 is NULL); priority orders queues
--   within a project;
-- * candidates: a queue with per-key limits (key_concurrency_limit, or rate_limit_per_key)
--   selects through codity_keyed_candidates(): each key's advisory lock taken without
--   waiting (a key another claimer holds is passed over), its room read with a fresh
--   snapshot after the lock, full keys passed over;
--   the plain branch gets LIMIT 0 for it, and the keyed branch is skipped for every other queue;
-- * the starts actually claimed are added to their rate windows (codity_rate_debit, one upsert
--   per window, under the queue's lock or the key's) by the report row, after the UPDATE; the
--   claim groups them per window and hands the debit one row each (migration 0032);
-- * one more row with id NULL when a queue has flow control (flow_queues = how many) or is
--   short of starts (retry_in_ms = when its next start frees up: the producer wakes then
--   instead of at its poll interval), or the claim is fair (drained, as in claim_jobs).
-- Rate-limited jobs are stamped claimed_at = their admission time (clock_timestamp() after the
-- lock), the instant their window counts them at.
-- Claim cursors work as in claim_jobs (the plain branch's three index ranges), and the keyed
-- branch and the fair shares' counts start at the cursor too: a claim does not step over the
-- index entries of the jobs it claimed before (the producer drops its cursors once a second,
-- which also finds jobs passed over because their key was full).
-- GENERIC PLANS: the worker runs this statement on a connection that plans it once and keeps
-- the plan (plan_cache_mode = force_generic_plan, worker.connection): planning a statement this
-- size on every claim cost more than the flow steps themselves. So every step keeps its index
-- path whatever the values: the candidate scans are ORDER BY ... LIMIT on idx_jobs_claim, and
-- the UPDATE finds its rows by primary key (`j.id = ANY(ARRAY(...))`) instead of joining an
-- estimated 10% of the table.
-- Parameters: $1 worker_id uuid, $2 lease_ms integer, $3 queue ids uuid[], $4 limit integer,
-- $5 fair shares between projects boolean, $6-$8 the cursors as claim_jobs's $5-$7,
-- $9 what the claimer holds in each queue integer[] (aligned with $3; NULL: not known),
-- $10 a rate-limited queue with room to spare may be claimed without its lock boolean.
WITH claimer AS (
  SELECT codity_require_worker($1::uuid) AS ok  -- as in claim_jobs
),
cursors AS (
  SELECT c.id, c.p, c.r, c.i
  FROM unnest($3::uuid[], $6::integer[], $7::timestamptz[], $8::bigint[]) AS c(id, p, r, i)
),
queue_order AS (
  SELECT o.id, o.pos,
         COALESCE(c.p, 32768) AS cp, COALESCE(c.r, '-infinity') AS cr, COALESCE(c.i, 0) AS ci
  FROM (SELECT array_agg(q.id ORDER BY q.priority DESC, q.id) AS ids
        FROM claimer w, queues q
        WHERE w.ok AND q.id = ANY($3::uuid[]) AND NOT q.is_paused) s
  CROSS JOIN LATERAL unnest(s.ids) WITH ORDINALITY AS o(id, pos)
  LEFT JOIN cursors c ON c.id = o.id AND c.p IS NOT NULL
),
settings AS (
  -- FLOW: the queues with a key limit or a rate limit, and those settings (read like a pause:
  -- a claim that began before a change applies the old value).
  SELECT q.id, q.key_concurrency_limit, q.rate_limit_count, q.rate_limit_period_ms,
         q.rate_limit_per_key
  FROM queue_order o JOIN queues q ON q.id = o.id
  WHERE q.key_concurrency_limit IS NOT NULL OR q.rate_limit_count IS NOT NULL
),
limited AS (
  -- Queues whose claimers take turns: a concurrency limit, or a queue-wide rate limit (one
  -- window). Locked in queue order (the same for every claimer), one queue at a time; the
  -- count runs above the lock, so it is taken after the lock is held. Per-key limits do not
  -- lock the queue: codity_keyed_candidates locks each key instead.
  SELECT l.id,
         CASE WHEN l.concurrency_limit IS NOT NULL
              THEN l.concurrency_limit - codity_leased_in_queue(l.id) END AS free
  FROM queue_order o
  CROSS JOIN LATERAL (
    SELECT q.id, q.concurrency_limit
    FROM queues q
    WHERE q.id = o.id
      AND (q.concurrency_limit IS NOT NULL
           OR (q.rate_limit_count IS NOT NULL AND NOT q.rate_limit_per_key
               AND NOT (COALESCE($10::boolean, false)
                        AND codity_rate_room(q.id, q.rate_limit_count, q.rate_limit_period_ms)
                            >= 10 * $4::integer)))
    FOR UPDATE OF q
  ) l
),
rated AS (
  -- FLOW: queue-wide rate limits, read after the lock (fresh snapshot), in queue order.
  SELECT l.id, r.free, r.at, r.next_in_ms
  FROM limited l
  JOIN settings s ON s.id = l.id
  CROSS JOIN LATERAL codity_rate_window(l.id, '', s.rate_limit_count, s.rate_limit_period_ms) r
  WHERE s.rate_limit_count IS NOT NULL AND NOT s.rate_limit_per_key
),
quota AS (
  SELECT o.id, o.pos, o.cp, o.cr, o.ci, LEAST(l.free, r.free, $4::integer) AS n, r.at,
         COALESCE(s.key_concurrency_limit IS NOT NULL OR s.rate_limit_per_key, false) AS keyed,
         s.key_concurrency_limit, s.rate_limit_count, s.rate_limit_period_ms,
         COALESCE(s.rate_limit_per_key, false) AS per_key
  FROM queue_order o
  LEFT JOIN settings s ON s.id = o.id
  LEFT JOIN limited l ON l.id = o.id
  LEFT JOIN rated r ON r.id = o.id
),
shares AS MATERIALIZED (
  -- FLOW: fair shares between projects; skipped (one-time filter) unless $5. MATERIALIZED:
  -- computed once (the candidates look a queue's share up per row; folded into that lookup,
  -- the function would run once per queue, each run breaking ties at random). The function's
  -- arrays come from one aggregate over quota (six subqueries, one per array, were planned
  -- nodes that every claim started and ended: 0.2M server instructions a claim, fair or not).
  SELECT f.id, f.n
  FROM (SELECT array_agg(q.id ORDER BY q.pos) AS ids,
               array_agg(GREATEST(q.n, 0) ORDER BY q.pos) AS quotas,
               array_agg(q.cp ORDER BY q.pos) AS cps,
               array_agg(q.cr ORDER BY q.pos) AS crs,
               array_agg(q.ci ORDER BY q.pos) AS cis,
               array_agg(h.n ORDER BY q.pos) FILTER (WHERE $9::integer[] IS NOT NULL) AS held
        FROM quota q
        LEFT JOIN unnest($3::uuid[], $9::integer[]) AS h(id, n) ON h.id = q.id) a
  CROSS JOIN LATERAL codity_fair_shares(a.ids, a.quotas, $4::integer, a.cps, a.crs, a.cis,
                                        $1::uuid, a.held) f
  WHERE $5::boolean
),
candidates AS (
  SELECT c.id, q.pos, COALESCE(q.at, c.at) AS at
  -- The queues in queue order, which the LIMIT $4 below relies on: sorted (a handful of rows),
  -- since quota's joins may emit them in any order (a hash join does; which join the planner
  -- takes depends on its estimates, and a rate-limited queue claimed without its lock left
  -- `limited` empty and changed them). A queue's share is looked up per row, not joined.
  FROM (SELECT q.*, t.take, CASE WHEN q.keyed THEN 0 ELSE t.take END AS plain_n
        FROM quota q
        CROSS JOIN LATERAL (
          SELECT GREATEST(COALESCE((SELECT s.n FROM shares s WHERE s.id = q.id), q.n), 0) AS take
        ) t
        ORDER BY q.pos) q
  CROSS JOIN LATERAL (
    SELECT p.id, NULL::timestamptz AS at
    FROM (
      SELECT above.id FROM (
        SELECT j2.id FROM jobs j2
        WHERE j2.queue_id = q.id AND j2.status = 'queued' AND j2.run_at <= now()
          AND j2.priority > q.cp
        ORDER BY j2.priority DESC, j2.run_at ASC, j2.id ASC
        LIMIT q.plain_n
        FOR UPDATE OF j2 SKIP LOCKED
      ) above
      UNION ALL
      SELECT at_cursor.id FROM (
        SELECT j2.id FROM jobs j2
        WHERE j2.queue_id = q.id AND j2.status = 'queued' AND j2.run_at <= now()
          AND j2.priority = q.cp AND (j2.run_at, j2.id) > (q.cr, q.ci)
        ORDER BY j2.priority DESC, j2.run_at ASC, j2.id ASC
        LIMIT q.plain_n
        FOR UPDATE OF j2 SKIP LOCKED
      ) at_cursor
      UNION ALL
      SELECT below.id FROM (
        SELECT j2.id FROM jobs j2
        WHERE j2.queue_id = q.id AND j2.status = 'queued' AND j2.run_at <= now()
          AND j2.priority < q.cp
        ORDER BY j2.priority DESC, j2.run_at ASC, j2.id ASC
        LIMIT q.plain_n
        FOR UPDATE OF j2 SKIP LOCKED
      ) below
      LIMIT q.plain_n
    ) p
    UNION ALL
    -- FLOW: per-key limits; skipped (one-time filter) for every other queue.
    SELECT k.id, k.at
    FROM codity_keyed_candidates(q.id, q.take, q.key_concurrency_limit, q.rate_limit_count,
                                 q.rate_limit_period_ms, q.per_key, q.cp, q.cr, q.ci) k
    WHERE q.keyed
  ) c
  LIMIT $4::integer
),
claimed AS (
  UPDATE jobs j
  SET status = 'claimed',
      worker_id = $1::uuid,
      claimed_at = COALESCE(sel.at, now()),
      started_at = NULL,
      lock_expires_at = now() + $2::integer * interval '1 millisecond',
      attempt = j.attempt + 1,
      execution_seq = j.execution_seq + 1,
      updated_at = now()
  FROM candidates sel
  WHERE j.id = sel.id AND j.id = ANY(ARRAY(SELECT c.id FROM candidates c))
  RETURNING j.id, j.queue_id, j.handler, j.payload, j.attempt, j.max_attempts, j.execution_seq,
            j.timeout_ms, j.priority, (extract(epoch FROM j.run_at) * 1000000)::bigint AS run_at_us,
            sel.pos, j.trace_parent,
            j.concurrency_key, j.claimed_at
)
SELECT c.id, c.queue_id, c.handler, c.payload, c.attempt, c.max_attempts, c.execution_seq,
       c.timeout_ms, c.priority, c.run_at_us, c.pos, c.trace_parent,
       NULL::double precision AS retry_in_ms, NULL::bigint AS flow_queues,
       NULL::integer AS recorded_starts, NULL::boolean AS drained
FROM claimed c
UNION ALL
-- The report row. Reading `claimed` here runs after the UPDATE, so the debit sees every start.
-- drained (as in claim_jobs; only for a fair claim of queues without flow control, the case
-- of a worker serving several tenants' plain queues): the claim took fewer than $4 and the
-- shares offered every job there was (they add up to less than $4: the water-filling gives
-- out min($4, the jobs available), so each queue's share was all it had), and no queue is
-- held back by its concurrency limit (gave as many as its limit left room for). Read against
-- the shares as quotas, a queue with no jobs (share 0) would look held back, and a fair
-- worker would claim again on every freed slot: 2 claims per job at a trickle.
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       (SELECT min(r.next_in_ms) FROM rated r WHERE r.free < $4::integer), f.n,
       CASE WHEN f.rated > 0
            THEN (SELECT codity_rate_debit(array_agg(g.queue_id), array_agg(g.key), array_agg(g.at),
                                           array_agg(g.n))
                  -- one row per window: the queue's, or the key's ('' without one) when the
                  -- limit is per key; its earliest admission time and how many starts
                  FROM (SELECT c.queue_id,
                               CASE WHEN s.rate_limit_per_key
                                    THEN COALESCE(c.concurrency_key, '') ELSE '' END AS key,
                               min(c.claimed_at) AS at, count(*)::integer AS n
                        FROM claimed c
                        JOIN settings s ON s.id = c.queue_id AND s.rate_limit_count IS NOT NULL
                        GROUP BY 1, 2) g)
       END,
       f.n = 0
         AND (SELECT count(*) FROM claimed) < $4::integer
         AND (SELECT COALESCE(sum(s.n), 0) FROM shares s) < $4::integer
         AND NOT EXISTS (SELECT FROM limited l
                         WHERE l.free <= (SELECT count(*) FROM claimed c WHERE c.queue_id = l.id))
FROM (SELECT count(*) AS n, count(*) FILTER (WHERE s.rate_limit_count IS NOT NULL) AS rated
      FROM settings s) f
WHERE f.n > 0 OR $5::boolean;

