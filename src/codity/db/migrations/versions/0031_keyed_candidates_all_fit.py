"""flow: a key-limited claim whose keys all have room takes what it scanned, without the take step

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07 02:20:00

`codity bench flow` put the key limit's cost at 0.86-0.91x of the drain (issue 9 asks for at
most 10%). Counted in server instructions (callgrind, a claim of 100 from a queue with 1,000
keys, claims committed and completed as in a drain), codity_keyed_candidates cost 5.5-5.9M a
claim on top of the same claim of a plain queue by the flow statement (16.0M), and the largest
step was not the locks (0.5M) or the keys' room (1.7M) but the take step (2.2M): a window
function ranking each scanned job among its key's, two joins and four aggregates, which decide
nothing when every key has room for all the jobs of it the round scanned.

- The lock step also counts each fresh key's scanned jobs, and the room step says whether every
  fresh key has room for all of them (`all_fit`). In the first round, with no key refused and
  all of them fitting, the function returns every scanned job at once: the claim is full, or
  the queue had no more to offer. Otherwise the take step runs as before.
- The scan's two arrays are aggregated in the order the scan returns its rows (the three index
  ranges of claim order, appended one after the other) instead of each sorting the rows again:
  0.4M a claim.

Together: 5.5M -> 3.4M a claim (`.venv/bin/python bench/flow_instructions.py --only F,K`, K's
count less F's). The function's results are unchanged; tests/integration/core/
test_core_flow_keys.py holds them, with a twin that lets a key "fit" whatever it scanned.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from codity.db.migrate import migration_module

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SIGNATURE = (
    "codity_keyed_candidates(uuid, integer, integer, integer, integer, boolean, integer,"
    " timestamptz, bigint)"
)

KEYED_CANDIDATES = """
CREATE OR REPLACE FUNCTION codity_keyed_candidates(
  queue uuid, want integer, key_limit integer, rate_quota integer, rate_period_ms integer,
  per_key boolean, cp integer, cr timestamptz, ci bigint
) RETURNS TABLE (id bigint, at timestamptz)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
-- Plans of the statements inside are made once per session and kept (generic plans:
-- each statement is shaped so its index serves it whatever the values), instead of being
-- planned again on every claim; every statement has an index path (migration 0021).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
  now_slot bigint;
  lock_at timestamptz;  -- when this round's keys were locked: the admission time of their starts
  held text[] := '{}';  -- keys whose lock this claim holds: it may take their jobs
  passed text[] := '{}';  -- keys passed over: locked by another claimer, or full
  room_keys text[] := '{}';  -- held keys and how many more of their jobs may start now
  room_left integer[] := '{}';
  room_at timestamptz[] := '{}';  -- when each was locked: the admission time of its starts
  picked bigint[] := '{}';
  picked_keys text[] := '{}';
  picked_at timestamptz[] := '{}';  -- aligned with picked: its key's admission time
  scan_ids bigint[];
  scan_keys text[];
  fresh text[];
  fresh_n integer[];  -- aligned with fresh: how many of the round's scanned jobs have the key
  all_fit boolean;  -- every fresh key has room for all of its scanned jobs
  refused text[];  -- this round's keys whose lock another claimer holds
  more bigint[];
  more_keys text[];
  more_at timestamptz[];
  now_full text[];
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
    --    Aggregated in the order the rows come: the three ranges, each in claim order, are
    --    appended one after the other (sorting them again cost 0.4M instructions a claim).
    --    The order only decides which of a key's jobs a key with less room takes first.
    SELECT COALESCE(array_agg(c.id), '{}'),
           COALESCE(array_agg(c.k), '{}')
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
    --    Each fresh key comes with how many of the scanned jobs have it (for all_fit).
    SELECT COALESCE(array_agg(x.k) FILTER (WHERE x.got), '{}'),
           COALESCE(array_agg(x.n) FILTER (WHERE x.got), '{}'),
           COALESCE(array_agg(x.k) FILTER (WHERE NOT x.got), '{}')
    INTO fresh, fresh_n, refused
    FROM (SELECT u.k, u.n,
                 (u.k = '' AND NOT per_key)
                 OR pg_try_advisory_xact_lock(1668244586, hashtext(queue::text || '/' || u.k))
                   AS got
          FROM (SELECT s.k, count(*)::integer AS n FROM unnest(scan_keys) AS s(k)
                WHERE NOT s.k = ANY(held) GROUP BY s.k) u) x;
    passed := passed || refused;
    -- step: admission time
    -- Taken after the locks, like codity_rate_window's after the queue row's: a key's previous
    -- holder committed (and recorded its starts) before this claim got the lock, so the starts
    -- of a key are stamped, and added to its window, in the order they are admitted. Stamped
    -- at the claim's start instead, a claim slow to reach the lock would date its starts
    -- before starts it saw recorded, and they would leave the window early.
    lock_at := clock_timestamp();
    now_slot := CASE WHEN per_key THEN codity_rate_slot(lock_at, rate_period_ms) END;
    held := held || fresh;
    -- step: room
    -- 3. The room of the keys just locked, read by a NEW statement: its snapshot is taken
    --    after the locks, so it sees every claim the key's previous holder committed.
    IF cardinality(fresh) > 0 THEN
      SELECT room_keys || array_agg(r.k), room_left || array_agg(r.n), bool_and(r.n >= r.scanned)
      INTO room_keys, room_left, all_fit
      FROM (
        SELECT f.k, f.scanned,
               COALESCE(LEAST(
                 CASE WHEN f.k <> '' THEN key_limit - l.n END,
                 CASE WHEN per_key
                      THEN rate_quota - COALESCE(codity_rate_used(w.slot, w.counts, now_slot), 0)
                 END), 2147483647) AS n
        FROM unnest(fresh, fresh_n) AS f(k, scanned)
        -- Each key's leased jobs: one probe of idx_jobs_key_leased per key (a lateral count,
        -- so the generic plan cannot fall back to reading every leased job of the queue).
        CROSS JOIN LATERAL (
          SELECT count(*)::integer AS n
          FROM jobs j
          WHERE key_limit IS NOT NULL AND j.queue_id = queue AND j.concurrency_key = f.k
            AND j.status IN ('claimed', 'running')
        ) l
        LEFT JOIN queue_rate_windows w ON per_key AND w.queue_id = queue AND w.key = f.k
      ) r;
      room_at := room_at || array_fill(lock_at, ARRAY[cardinality(fresh)]);
    END IF;
    -- step: all fit
    -- The first round, no key refused, and every key with room for all of its scanned jobs
    -- (the usual case while the keys have room): every scanned job is taken, and the claim
    -- is then full or the queue had no more to offer, so nothing is left to do. The take
    -- step below, which ranks each job among its key's, would take them all.
    IF rounds = 1 AND cardinality(refused) = 0 AND all_fit THEN
      RETURN QUERY SELECT u.id, lock_at FROM unnest(scan_ids) AS u(id);
      RETURN;
    END IF;
    -- step: take
    -- 4. Take the scanned jobs of held keys while their key has room (its rank among them
    --    plus what this claim took of it before); a key that ran out is passed over from now.
    WITH scanned AS (
      SELECT s.id, s.k, row_number() OVER (PARTITION BY s.k ORDER BY s.ord) AS rn
      FROM unnest(scan_ids, scan_keys) WITH ORDINALITY AS s(id, k, ord)
      -- A scanned key is held unless its lock was refused this round (a key passed over
      -- before is not scanned): the short list, not the long one, is searched per job.
      WHERE NOT s.k = ANY(refused)
    ),
    used AS (
      SELECT u.k, count(*)::integer AS n FROM unnest(picked_keys) AS u(k) GROUP BY u.k
    ),
    judged AS (
      SELECT x.id, x.k, r.at, x.rn + COALESCE(u.n, 0) <= COALESCE(r.n, 0) AS fits
      FROM scanned x
      LEFT JOIN used u ON u.k = x.k
      LEFT JOIN unnest(room_keys, room_left, room_at) AS r(k, n, at) ON r.k = x.k
    )
    SELECT COALESCE(array_agg(j.id) FILTER (WHERE j.fits), '{}'),
           COALESCE(array_agg(j.k) FILTER (WHERE j.fits), '{}'),
           COALESCE(array_agg(j.at) FILTER (WHERE j.fits), '{}'),
           COALESCE(array_agg(DISTINCT j.k) FILTER (WHERE NOT j.fits), '{}')
    INTO more, more_keys, more_at, now_full
    FROM judged j;
    picked := picked || more;
    picked_keys := picked_keys || more_keys;
    picked_at := picked_at || more_at;
    passed := passed || now_full;
    EXIT WHEN cardinality(scan_ids) < need;  -- the queue has nothing more to offer
  END LOOP;
  -- Each job with the admission time of its key (taken when the key was locked).
  RETURN QUERY SELECT u.pid, u.pat FROM unnest(picked, picked_at) AS u(pid, pat);
END
$$
"""


def upgrade() -> None:
    op.execute(KEYED_CANDIDATES)


def downgrade() -> None:
    # Migration 0020's function, with migration 0021's setting.
    op.execute(migration_module("0020_flow_key_leased_index.py").KEYED_CANDIDATES)
    op.execute(f"ALTER FUNCTION {SIGNATURE} SET enable_seqscan = off")
