"""flow control: a per-key start is stamped after its key's lock; per-key rate needs a rate

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03 14:00:00

- codity_keyed_candidates took the admission time of its starts (`at`, which the claim writes to
  claimed_at and codity_rate_debit adds to the window) once, at the function's entry, before
  the key locks; docs/CONCURRENCY.md said "clock_timestamp() taken after the lock". A claim that
  reached a key's lock late (its scan slow, the machine busy) then dated its starts before starts
  it had just seen recorded: the debit folded them into that older slot and they left the window
  early, so the next period's starts came in too soon. The time is now taken after each round's
  locks, one per key, as codity_rate_window takes it after the queue row's lock
  (tests/integration/core/test_core_flow_rate.py,
  test_a_per_key_start_is_stamped_after_its_key_lock_and_a_slow_claim_does_not_overrun).
- ck_queues_rate_limit_per_key_needs_a_limit: rate_limit_per_key only with a rate limit. The API
  refused the combination on create but a PATCH stored it; the CHECK refuses it however the
  row is written (queues that had it get rate_limit_per_key = false, which changed nothing:
  without a rate limit the flag does nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY_LOCK_CLASS = 1668244586

PER_KEY_CHECK = "rate_limit_count IS NOT NULL OR NOT rate_limit_per_key"

KEYED_CANDIDATES = f"""
CREATE OR REPLACE FUNCTION codity_keyed_candidates(
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
  lock_at timestamptz;  -- when this round's keys were locked: the admission time of their starts
  held text[] := '{{}}';  -- keys whose lock this claim holds: it may take their jobs
  held_at timestamptz[] := '{{}}';  -- aligned with held: when each was locked
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
    --    limit) unless the rate limit is per key (they share the '' window). One statement for
    --    all the keys of the round (a loop of one lock call per key cost more than the rest).
    SELECT COALESCE(array_agg(x.k) FILTER (WHERE x.got), '{{}}'),
           COALESCE(array_agg(x.k) FILTER (WHERE NOT x.got), '{{}}')
    INTO fresh, now_full
    FROM (SELECT u.k,
                 (u.k = '' AND NOT per_key)
                 OR pg_try_advisory_xact_lock({KEY_LOCK_CLASS}, hashtext(queue::text || '/' || u.k))
                   AS got
          FROM (SELECT DISTINCT s.k FROM unnest(scan_keys) AS s(k)
                WHERE NOT s.k = ANY(held)) u) x;
    passed := passed || now_full;  -- here: the keys another claimer holds
    -- step: admission time
    -- Taken after the locks, like codity_rate_window's after the queue row's: a key's previous
    -- holder committed (and recorded its starts) before this claim got the lock, so the starts
    -- of a key are stamped, and added to its window, in the order they are admitted. Stamped
    -- at the claim's start instead, a claim slow to reach the lock would date its starts
    -- before starts it saw recorded, and they would leave the window early.
    lock_at := clock_timestamp();
    now_slot := CASE WHEN per_key THEN codity_rate_slot(lock_at, rate_period_ms) END;
    held := held || fresh;
    held_at := held_at || array_fill(lock_at, ARRAY[cardinality(fresh)]);
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
  -- Each job with the admission time of its key (taken when the key was locked).
  RETURN QUERY
  SELECT u.pid, h.hat
  FROM unnest(picked, picked_keys) WITH ORDINALITY AS u(pid, pk, ord)
  JOIN unnest(held, held_at) AS h(hk, hat) ON h.hk = u.pk
  ORDER BY u.ord;
END
$$
"""

PREVIOUS_KEYED_CANDIDATES = f"""
CREATE OR REPLACE FUNCTION codity_keyed_candidates(
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
    --    limit) unless the rate limit is per key (they share the '' window). One statement for
    --    all the keys of the round (a loop of one lock call per key cost more than the rest).
    SELECT COALESCE(array_agg(x.k) FILTER (WHERE x.got), '{{}}'),
           COALESCE(array_agg(x.k) FILTER (WHERE NOT x.got), '{{}}')
    INTO fresh, now_full
    FROM (SELECT u.k,
                 (u.k = '' AND NOT per_key)
                 OR pg_try_advisory_xact_lock({KEY_LOCK_CLASS}, hashtext(queue::text || '/' || u.k))
                   AS got
          FROM (SELECT DISTINCT s.k FROM unnest(scan_keys) AS s(k)
                WHERE NOT s.k = ANY(held)) u) x;
    held := held || fresh;
    passed := passed || now_full;  -- here: the keys another claimer holds
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


def upgrade() -> None:
    op.execute(KEYED_CANDIDATES)
    op.execute(
        "UPDATE queues SET rate_limit_per_key = false "
        "WHERE rate_limit_per_key AND rate_limit_count IS NULL"
    )
    op.create_check_constraint(
        op.f("ck_queues_rate_limit_per_key_needs_a_limit"), "queues", PER_KEY_CHECK
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_queues_rate_limit_per_key_needs_a_limit"), "queues", type_="check")
    op.execute(PREVIOUS_KEYED_CANDIDATES)
