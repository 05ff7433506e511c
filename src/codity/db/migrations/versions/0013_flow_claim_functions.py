"""flow control: the rate-limit debit as one function; claim cursors in the keyed and fair steps

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 21:40:00

claim_jobs_flow recorded its starts with a data-modifying CTE (an upsert joined with
codity_rate_buckets). Planning that CTE on every claim cost about 0.12 ms, paid by every claim of
a worker with flow-controlled queues, configured or not. The claim now calls codity_rate_debit
once, from its report row and only when a queue is rate-limited; the function groups the
claimed starts per window and upserts them with a plan it keeps. codity_rate_buckets is gone.

codity_keyed_candidates and codity_fair_shares take the claimer's cursor per queue, like the
plain claim (docs/CONCURRENCY.md, "The cursor"): read from the front of the claim index, they
stepped over the entries of every job claimed since the last vacuum, which in a drain cost a
flow-controlled claim more than all its own work.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RATE_DEBIT = """
CREATE FUNCTION codity_rate_debit(queue_ids uuid[], keys text[], ats timestamptz[])
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  recorded integer;
BEGIN
  -- The claim's starts (one element per job claimed: its queue, concurrency key and admission
  -- time) added to their windows: one per rate-limited queue, or one per key ('' for jobs
  -- without one) with rate_limit_per_key. Called by the claim after its UPDATE, while it still
  -- holds each window's lock (the queue row's, or the key's).
  WITH starts AS (
    SELECT u.q AS queue_id,
           CASE WHEN qu.rate_limit_per_key THEN COALESCE(u.k, '') ELSE '' END AS key,
           min(u.at) AS at, count(*)::integer AS n, max(qu.rate_limit_period_ms) AS period_ms
    FROM unnest(queue_ids, keys, ats) AS u(q, k, at)
    JOIN queues qu ON qu.id = u.q
    WHERE qu.rate_limit_count IS NOT NULL
    GROUP BY 1, 2
  ),
  written AS (
    INSERT INTO queue_rate_windows AS w (queue_id, key, slot, counts)
    SELECT s.queue_id, s.key, codity_rate_slot(s.at, s.period_ms),
           codity_rate_add(NULL, NULL, codity_rate_slot(s.at, s.period_ms), s.n)
    FROM starts s
    ON CONFLICT (queue_id, key) DO UPDATE
    SET slot = GREATEST(w.slot, excluded.slot),
        counts = codity_rate_add(w.slot, w.counts, excluded.slot, excluded.counts[1])
    RETURNING 1
  )
  SELECT COALESCE(sum(s.n), 0)::integer INTO recorded
  FROM starts s WHERE EXISTS (SELECT 1 FROM written);
  RETURN recorded;
END
$$
"""

RATE_BUCKETS = """
CREATE FUNCTION codity_rate_buckets(keys text[], per_key boolean)
RETURNS TABLE (key text, n integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  -- Claimed jobs counted per window: one window per queue, or one per concurrency key ('' for
  -- jobs with no key). NULL keys (nothing claimed): no row.
  SELECT CASE WHEN per_key THEN COALESCE(k, '') ELSE '' END, count(*)::integer
  FROM unnest(keys) AS k
  GROUP BY 1
$$
"""


KEY_LOCK_CLASS = 1668244586

NEW_KEYED_CANDIDATES = f"""
CREATE FUNCTION codity_keyed_candidates(
  queue uuid, want integer, key_limit integer, rate_quota integer, rate_period_ms integer,
  per_key boolean, cp integer, cr timestamptz, ci bigint
) RETURNS TABLE (id bigint, at timestamptz)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
-- Plans of the statements inside are made once per session and kept (generic plans:
-- each statement is shaped so its index serves it whatever the values), instead of being
-- planned again on every claim.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  now_slot bigint;
  held text[] := '{{}}';  -- keys whose lock this claim holds: it may take their jobs
  passed text[] := '{{}}';  -- keys passed over: locked by another claimer, or full
  room_keys text[] := '{{}}';  -- held keys and how many more of their jobs may start now
  room_left integer[] := '{{}}';
  picked bigint[] := '{{}}';
  picked_keys text[] := '{{}}';
  scan_ids bigint[];
  scan_keys text[];
  fresh text[];
  more bigint[];
  more_keys text[];
  now_full text[];
  k text;
  need integer;
  rounds integer := 0;
BEGIN
  IF want <= 0 THEN
    RETURN;
  END IF;
  at := clock_timestamp();
  now_slot := CASE WHEN per_key THEN codity_rate_slot(at, rate_period_ms) END;
  LOOP
    need := want - cardinality(picked);
    EXIT WHEN need <= 0 OR rounds >= 10;
    rounds := rounds + 1;
    -- 1. The queue's next jobs, in its order (the claim index), keys passed over skipped;
    --    from the claimer's cursor like the plain claim (cp 32768: no cursor, from the front):
    --    higher priorities, then the cursor's priority after it, then lower priorities.
    SELECT COALESCE(array_agg(c.id ORDER BY c.priority DESC, c.run_at, c.id), '{{}}'),
           COALESCE(array_agg(c.k ORDER BY c.priority DESC, c.run_at, c.id), '{{}}')
    INTO scan_ids, scan_keys
    FROM (
      SELECT * FROM (
        SELECT j.id, COALESCE(j.concurrency_key, '') AS k, j.priority, j.run_at
        FROM jobs j
        WHERE j.queue_id = queue AND j.status = 'queued' AND j.run_at <= now()
          AND j.priority > cp
          AND NOT COALESCE(j.concurrency_key, '') = ANY(passed) AND NOT j.id = ANY(picked)
        ORDER BY j.priority DESC, j.run_at ASC, j.id ASC
        LIMIT need
        FOR UPDATE OF j SKIP LOCKED) above
      UNION ALL
      SELECT * FROM (
        SELECT j.id, COALESCE(j.concurrency_key, '') AS k, j.priority, j.run_at
        FROM jobs j
        WHERE j.queue_id = queue AND j.status = 'queued' AND j.run_at <= now()
          AND j.priority = cp AND (j.run_at, j.id) > (cr, ci)
          AND NOT COALESCE(j.concurrency_key, '') = ANY(passed) AND NOT j.id = ANY(picked)
        ORDER BY j.priority DESC, j.run_at ASC, j.id ASC
        LIMIT need
        FOR UPDATE OF j SKIP LOCKED) at_cursor
      UNION ALL
      SELECT * FROM (
        SELECT j.id, COALESCE(j.concurrency_key, '') AS k, j.priority, j.run_at
        FROM jobs j
        WHERE j.queue_id = queue AND j.status = 'queued' AND j.run_at <= now()
          AND j.priority < cp
          AND NOT COALESCE(j.concurrency_key, '') = ANY(passed) AND NOT j.id = ANY(picked)
        ORDER BY j.priority DESC, j.run_at ASC, j.id ASC
        LIMIT need
        FOR UPDATE OF j SKIP LOCKED) below
      LIMIT need
    ) c;
    -- step: lock keys
    -- 2. Lock each key met for the first time, never waiting: a key another claimer holds is
    --    passed over by this claim (SKIP LOCKED, for keys). Claimers of different keys run in
    --    parallel; claimers of one key take turns. Jobs without a key need no lock (no key
    --    limit) unless the rate limit is per key (they share the '' window).
    fresh := '{{}}';
    FOREACH k IN ARRAY ARRAY(SELECT DISTINCT u.k FROM unnest(scan_keys) AS u(k)
                             WHERE NOT u.k = ANY(held)) LOOP
      IF k = '' AND NOT per_key THEN
        held := held || k;
        room_keys := room_keys || k;
        room_left := room_left || 2147483647;
      ELSIF pg_try_advisory_xact_lock({KEY_LOCK_CLASS}, hashtext(queue::text || '/' || k)) THEN
        held := held || k;
        fresh := fresh || k;
      ELSE
        passed := passed || k;
      END IF;
    END LOOP;
    -- step: room
    -- 3. The room of the keys just locked, read by a NEW statement: its snapshot is taken
    --    after the locks, so it sees every claim the key's previous holder committed.
    IF cardinality(fresh) > 0 THEN
      WITH leased AS (
        SELECT j.concurrency_key AS k, count(*)::integer AS n
        FROM jobs j
        WHERE key_limit IS NOT NULL AND j.queue_id = queue
          AND j.status IN ('claimed', 'running') AND j.concurrency_key = ANY(fresh)
        GROUP BY 1
      )
      SELECT room_keys || array_agg(f.k),
             room_left || array_agg(COALESCE(LEAST(
               CASE WHEN f.k <> '' THEN key_limit - COALESCE(l.n, 0) END,
               CASE WHEN per_key
                    THEN rate_quota - COALESCE(codity_rate_used(w.slot, w.counts, now_slot), 0)
               END), 2147483647))
      INTO room_keys, room_left
      FROM unnest(fresh) AS f(k)
      LEFT JOIN leased l ON l.k = f.k
      LEFT JOIN queue_rate_windows w ON per_key AND w.queue_id = queue AND w.key = f.k;
    END IF;
    -- step: take
    -- 4. Take the scanned jobs of held keys while their key has room (its rank among them
    --    plus what this claim took of it before); a key that ran out is passed over from now.
    WITH scanned AS (
      SELECT s.id, s.k, row_number() OVER (PARTITION BY s.k ORDER BY s.ord) AS rn
      FROM unnest(scan_ids, scan_keys) WITH ORDINALITY AS s(id, k, ord)
      WHERE s.k = ANY(held)
    ),
    used AS (
      SELECT u.k, count(*)::integer AS n FROM unnest(picked_keys) AS u(k) GROUP BY u.k
    ),
    judged AS (
      SELECT x.id, x.k, x.rn + COALESCE(u.n, 0) <= COALESCE(r.n, 0) AS fits
      FROM scanned x
      LEFT JOIN used u ON u.k = x.k
      LEFT JOIN unnest(room_keys, room_left) AS r(k, n) ON r.k = x.k
    )
    SELECT COALESCE(array_agg(j.id) FILTER (WHERE j.fits), '{{}}'),
           COALESCE(array_agg(j.k) FILTER (WHERE j.fits), '{{}}'),
           COALESCE(array_agg(DISTINCT j.k) FILTER (WHERE NOT j.fits), '{{}}')
    INTO more, more_keys, now_full
    FROM judged j;
    picked := picked || more;
    picked_keys := picked_keys || more_keys;
    passed := passed || now_full;
    EXIT WHEN cardinality(scan_ids) < need;  -- the queue has nothing more to offer
  END LOOP;
  RETURN QUERY SELECT u.id, at FROM unnest(picked) AS u(id);
END
$$
"""

NEW_FAIR_SHARES = """
CREATE FUNCTION codity_fair_shares(
  queue_ids uuid[], quotas integer[], want integer, cps integer[], crs timestamptz[],
  cis bigint[]
)
RETURNS TABLE (id uuid, n integer)
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
-- Plans of the statements inside are made once per session and kept (generic plans:
-- each statement is shaped so its index serves it whatever the values), instead of being
-- planned again on every claim.
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
  -- One statement (plpgsql keeps its plan between calls), read with the claim's snapshot:
  -- fairness is a share, not a limit, so a claim committed a moment ago and missed here only
  -- shifts the next claim a little.
  RETURN QUERY
  WITH queue AS (  -- each queue: its project, and how many jobs it could give (up to quota)
    SELECT u.qid, u.ord, qu.project_id, p.weight,
           (SELECT count(*)::integer FROM (  -- from the claimer's cursor, in index order
              SELECT 1 FROM (SELECT 1 FROM jobs j
                             WHERE j.queue_id = u.qid AND j.status = 'queued'
                               AND j.run_at <= now() AND j.priority > u.cp
                             ORDER BY j.priority DESC, j.run_at, j.id
                             LIMIT GREATEST(u.quota, 0)) above
              UNION ALL
              SELECT 1 FROM (SELECT 1 FROM jobs j
                             WHERE j.queue_id = u.qid AND j.status = 'queued'
                               AND j.run_at <= now() AND j.priority = u.cp
                               AND (j.run_at, j.id) > (u.cr, u.ci)
                             ORDER BY j.priority DESC, j.run_at, j.id
                             LIMIT GREATEST(u.quota, 0)) at_cursor
              UNION ALL
              SELECT 1 FROM (SELECT 1 FROM jobs j
                             WHERE j.queue_id = u.qid AND j.status = 'queued'
                               AND j.run_at <= now() AND j.priority < u.cp
                             ORDER BY j.priority DESC, j.run_at, j.id
                             LIMIT GREATEST(u.quota, 0)) below
              LIMIT GREATEST(u.quota, 0)) a) AS avail
    FROM unnest(queue_ids, quotas, cps, crs, cis)
         WITH ORDINALITY AS u(qid, quota, cp, cr, ci, ord)
    JOIN queues qu ON qu.id = u.qid
    JOIN projects p ON p.id = qu.project_id
  ),
  busy AS (  -- each project: its jobs leased now in these queues (idx_jobs_queue_status_id)
    SELECT q.project_id, count(*)::integer AS n
    FROM (SELECT j.queue_id FROM jobs j
          WHERE j.queue_id = ANY(queue_ids) AND j.status IN ('claimed', 'running')) l
    JOIN queue q ON q.qid = l.queue_id
    GROUP BY q.project_id
  ),
  project AS (
    SELECT q.project_id, max(q.weight) AS weight, sum(q.avail)::integer AS avail
    FROM queue q GROUP BY q.project_id
  ),
  slot AS (  -- every slot a project could take, scored by its load per weight with it
    SELECT p.project_id, (COALESCE(b.n, 0) + k)::double precision / p.weight AS score
    FROM project p
    LEFT JOIN busy b ON b.project_id = p.project_id
    CROSS JOIN generate_series(1, LEAST(p.avail, want)) AS k
  ),
  taken AS (  -- water-filling: the claim's slots go to the lowest scores (ties at random)
    SELECT t.project_id, count(*)::integer AS n
    FROM (SELECT s.project_id FROM slot s ORDER BY s.score, random() LIMIT want) t
    GROUP BY t.project_id
  ),
  spread AS (  -- a project's share goes to its queues in the claim's (priority) order
    SELECT q.qid, q.ord, q.avail, COALESCE(t.n, 0) AS share,
           (sum(q.avail) OVER (PARTITION BY q.project_id ORDER BY q.ord) - q.avail)::integer
             AS before
    FROM queue q LEFT JOIN taken t ON t.project_id = q.project_id
  )
  SELECT s.qid, GREATEST(0, LEAST(s.avail, s.share - s.before))::integer
  FROM spread s ORDER BY s.ord;
END
$$
"""

OLD_KEYED_CANDIDATES = f"""
CREATE FUNCTION codity_keyed_candidates(
  queue uuid, want integer, key_limit integer, rate_quota integer, rate_period_ms integer,
  per_key boolean
) RETURNS TABLE (id bigint, at timestamptz)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
-- Plans of the statements inside are made once per session and kept (generic plans:
-- each statement is shaped so its index serves it whatever the values), instead of being
-- planned again on every claim.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  now_slot bigint;
  held text[] := '{{}}';  -- keys whose lock this claim holds: it may take their jobs
  passed text[] := '{{}}';  -- keys passed over: locked by another claimer, or full
  room_keys text[] := '{{}}';  -- held keys and how many more of their jobs may start now
  room_left integer[] := '{{}}';
  picked bigint[] := '{{}}';
  picked_keys text[] := '{{}}';
  scan_ids bigint[];
  scan_keys text[];
  fresh text[];
  more bigint[];
  more_keys text[];
  now_full text[];
  k text;
  need integer;
  rounds integer := 0;
BEGIN
  IF want <= 0 THEN
    RETURN;
  END IF;
  at := clock_timestamp();
  now_slot := CASE WHEN per_key THEN codity_rate_slot(at, rate_period_ms) END;
  LOOP
    need := want - cardinality(picked);
    EXIT WHEN need <= 0 OR rounds >= 10;
    rounds := rounds + 1;
    -- 1. The queue's next jobs, in its order (the claim index), keys passed over skipped.
    SELECT COALESCE(array_agg(c.id ORDER BY c.priority DESC, c.run_at, c.id), '{{}}'),
           COALESCE(array_agg(c.k ORDER BY c.priority DESC, c.run_at, c.id), '{{}}')
    INTO scan_ids, scan_keys
    FROM (SELECT j.id, COALESCE(j.concurrency_key, '') AS k, j.priority, j.run_at
          FROM jobs j
          WHERE j.queue_id = queue AND j.status = 'queued' AND j.run_at <= now()
            AND NOT COALESCE(j.concurrency_key, '') = ANY(passed) AND NOT j.id = ANY(picked)
          ORDER BY j.priority DESC, j.run_at ASC, j.id ASC
          LIMIT need
          FOR UPDATE OF j SKIP LOCKED) c;
    -- step: lock keys
    -- 2. Lock each key met for the first time, never waiting: a key another claimer holds is
    --    passed over by this claim (SKIP LOCKED, for keys). Claimers of different keys run in
    --    parallel; claimers of one key take turns. Jobs without a key need no lock (no key
    --    limit) unless the rate limit is per key (they share the '' window).
    fresh := '{{}}';
    FOREACH k IN ARRAY ARRAY(SELECT DISTINCT u.k FROM unnest(scan_keys) AS u(k)
                             WHERE NOT u.k = ANY(held)) LOOP
      IF k = '' AND NOT per_key THEN
        held := held || k;
        room_keys := room_keys || k;
        room_left := room_left || 2147483647;
      ELSIF pg_try_advisory_xact_lock({KEY_LOCK_CLASS}, hashtext(queue::text || '/' || k)) THEN
        held := held || k;
        fresh := fresh || k;
      ELSE
        passed := passed || k;
      END IF;
    END LOOP;
    -- step: room
    -- 3. The room of the keys just locked, read by a NEW statement: its snapshot is taken
    --    after the locks, so it sees every claim the key's previous holder committed.
    IF cardinality(fresh) > 0 THEN
      WITH leased AS (
        SELECT j.concurrency_key AS k, count(*)::integer AS n
        FROM jobs j
        WHERE key_limit IS NOT NULL AND j.queue_id = queue
          AND j.status IN ('claimed', 'running') AND j.concurrency_key = ANY(fresh)
        GROUP BY 1
      )
      SELECT room_keys || array_agg(f.k),
             room_left || array_agg(COALESCE(LEAST(
               CASE WHEN f.k <> '' THEN key_limit - COALESCE(l.n, 0) END,
               CASE WHEN per_key
                    THEN rate_quota - COALESCE(codity_rate_used(w.slot, w.counts, now_slot), 0)
               END), 2147483647))
      INTO room_keys, room_left
      FROM unnest(fresh) AS f(k)
      LEFT JOIN leased l ON l.k = f.k
      LEFT JOIN queue_rate_windows w ON per_key AND w.queue_id = queue AND w.key = f.k;
    END IF;
    -- step: take
    -- 4. Take the scanned jobs of held keys while their key has room (its rank among them
    --    plus what this claim took of it before); a key that ran out is passed over from now.
    WITH scanned AS (
      SELECT s.id, s.k, row_number() OVER (PARTITION BY s.k ORDER BY s.ord) AS rn
      FROM unnest(scan_ids, scan_keys) WITH ORDINALITY AS s(id, k, ord)
      WHERE s.k = ANY(held)
    ),
    used AS (
      SELECT u.k, count(*)::integer AS n FROM unnest(picked_keys) AS u(k) GROUP BY u.k
    ),
    judged AS (
      SELECT x.id, x.k, x.rn + COALESCE(u.n, 0) <= COALESCE(r.n, 0) AS fits
      FROM scanned x
      LEFT JOIN used u ON u.k = x.k
      LEFT JOIN unnest(room_keys, room_left) AS r(k, n) ON r.k = x.k
    )
    SELECT COALESCE(array_agg(j.id) FILTER (WHERE j.fits), '{{}}'),
           COALESCE(array_agg(j.k) FILTER (WHERE j.fits), '{{}}'),
           COALESCE(array_agg(DISTINCT j.k) FILTER (WHERE NOT j.fits), '{{}}')
    INTO more, more_keys, now_full
    FROM judged j;
    picked := picked || more;
    picked_keys := picked_keys || more_keys;
    passed := passed || now_full;
    EXIT WHEN cardinality(scan_ids) < need;  -- the queue has nothing more to offer
  END LOOP;
  RETURN QUERY SELECT u.id, at FROM unnest(picked) AS u(id);
END
$$
"""

OLD_FAIR_SHARES = """
CREATE FUNCTION codity_fair_shares(queue_ids uuid[], quotas integer[], want integer)
RETURNS TABLE (id uuid, n integer)
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
-- Plans of the statements inside are made once per session and kept (generic plans:
-- each statement is shaped so its index serves it whatever the values), instead of being
-- planned again on every claim.
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
  -- One statement (plpgsql keeps its plan between calls), read with the claim's snapshot:
  -- fairness is a share, not a limit, so a claim committed a moment ago and missed here only
  -- shifts the next claim a little.
  RETURN QUERY
  WITH queue AS (  -- each queue: its project, and how many jobs it could give (up to quota)
    SELECT u.qid, u.ord, qu.project_id, p.weight,
           (SELECT count(*)::integer FROM (
              SELECT 1 FROM jobs j  -- in the claim index's order, so that index serves it
              WHERE j.queue_id = u.qid AND j.status = 'queued' AND j.run_at <= now()
              ORDER BY j.priority DESC, j.run_at, j.id
              LIMIT GREATEST(u.quota, 0)) a) AS avail
    FROM unnest(queue_ids, quotas) WITH ORDINALITY AS u(qid, quota, ord)
    JOIN queues qu ON qu.id = u.qid
    JOIN projects p ON p.id = qu.project_id
  ),
  busy AS (  -- each project: its jobs leased now in these queues (idx_jobs_queue_status_id)
    SELECT q.project_id, count(*)::integer AS n
    FROM (SELECT j.queue_id FROM jobs j
          WHERE j.queue_id = ANY(queue_ids) AND j.status IN ('claimed', 'running')) l
    JOIN queue q ON q.qid = l.queue_id
    GROUP BY q.project_id
  ),
  project AS (
    SELECT q.project_id, max(q.weight) AS weight, sum(q.avail)::integer AS avail
    FROM queue q GROUP BY q.project_id
  ),
  slot AS (  -- every slot a project could take, scored by its load per weight with it
    SELECT p.project_id, (COALESCE(b.n, 0) + k)::double precision / p.weight AS score
    FROM project p
    LEFT JOIN busy b ON b.project_id = p.project_id
    CROSS JOIN generate_series(1, LEAST(p.avail, want)) AS k
  ),
  taken AS (  -- water-filling: the claim's slots go to the lowest scores (ties at random)
    SELECT t.project_id, count(*)::integer AS n
    FROM (SELECT s.project_id FROM slot s ORDER BY s.score, random() LIMIT want) t
    GROUP BY t.project_id
  ),
  spread AS (  -- a project's share goes to its queues in the claim's (priority) order
    SELECT q.qid, q.ord, q.avail, COALESCE(t.n, 0) AS share,
           (sum(q.avail) OVER (PARTITION BY q.project_id ORDER BY q.ord) - q.avail)::integer
             AS before
    FROM queue q LEFT JOIN taken t ON t.project_id = q.project_id
  )
  SELECT s.qid, GREATEST(0, LEAST(s.avail, s.share - s.before))::integer
  FROM spread s ORDER BY s.ord;
END
$$
"""

OLD_KEYED = "codity_keyed_candidates(uuid, integer, integer, integer, integer, boolean)"
NEW_KEYED = (
    "codity_keyed_candidates(uuid, integer, integer, integer, integer, boolean, integer, "
    "timestamptz, bigint)"
)
OLD_FAIR = "codity_fair_shares(uuid[], integer[], integer)"
NEW_FAIR = "codity_fair_shares(uuid[], integer[], integer, integer[], timestamptz[], bigint[])"


def upgrade() -> None:
    op.execute(RATE_DEBIT)
    op.execute("DROP FUNCTION IF EXISTS codity_rate_buckets(text[], boolean)")
    op.execute(f"DROP FUNCTION IF EXISTS {OLD_KEYED}")
    op.execute(NEW_KEYED_CANDIDATES)
    op.execute(f"DROP FUNCTION IF EXISTS {OLD_FAIR}")
    op.execute(NEW_FAIR_SHARES)


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {NEW_FAIR}")
    op.execute(OLD_FAIR_SHARES)
    op.execute(f"DROP FUNCTION IF EXISTS {NEW_KEYED}")
    op.execute(OLD_KEYED_CANDIDATES)
    op.execute(RATE_BUCKETS)
    op.execute("DROP FUNCTION IF EXISTS codity_rate_debit(uuid[], text[], timestamptz[])")
