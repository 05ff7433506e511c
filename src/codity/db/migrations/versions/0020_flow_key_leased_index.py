"""flow control: a key limit's claim reads each key's leased jobs from an index of its own

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03 15:40:00

`codity bench flow` put the key limit's cost at 0.79-0.82x of the drain (issue 9 asks for at
most 10%). Two steps of codity_keyed_candidates grew with the square of the claim's size:

- the room of the keys just locked counted their leased jobs through idx_jobs_worker_leased,
  every leased job of the database read and its key compared with each of the claim's keys
  (100 keys x every leased job). idx_jobs_key_leased (queue_id, concurrency_key), partial on
  leased jobs that have a key, answers one probe per key; jobs without a key never enter it.
- the take step searched the list of held keys (about one per job claimed) for each scanned
  job; it now searches this round's refused keys, nearly always none: a scanned key is held
  unless its lock was refused this round (keys passed over before are not scanned).
- each job's admission time (its key's lock time) came from joining the picked jobs with the
  held keys at the end; the take step now carries it from the key's room row.

The function's behaviour is unchanged; tests/integration/core/test_core_flow_keys.py holds it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from codity.db.migrate import migration_module

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY_LOCK_CLASS = 1668244586

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
  passed text[] := '{{}}';  -- keys passed over: locked by another claimer, or full
  room_keys text[] := '{{}}';  -- held keys and how many more of their jobs may start now
  room_left integer[] := '{{}}';
  room_at timestamptz[] := '{{}}';  -- when each was locked: the admission time of its starts
  picked bigint[] := '{{}}';
  picked_keys text[] := '{{}}';
  picked_at timestamptz[] := '{{}}';  -- aligned with picked: its key's admission time
  scan_ids bigint[];
  scan_keys text[];
  fresh text[];
  refused text[];  -- this round's keys whose lock another claimer holds
  more bigint[];
  more_keys text[];
  more_at timestamptz[];
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
    INTO fresh, refused
    FROM (SELECT u.k,
                 (u.k = '' AND NOT per_key)
                 OR pg_try_advisory_xact_lock({KEY_LOCK_CLASS}, hashtext(queue::text || '/' || u.k))
                   AS got
          FROM (SELECT DISTINCT s.k FROM unnest(scan_keys) AS s(k)
                WHERE NOT s.k = ANY(held)) u) x;
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
      SELECT room_keys || array_agg(f.k),
             room_left || array_agg(COALESCE(LEAST(
               CASE WHEN f.k <> '' THEN key_limit - l.n END,
               CASE WHEN per_key
                    THEN rate_quota - COALESCE(codity_rate_used(w.slot, w.counts, now_slot), 0)
               END), 2147483647))
      INTO room_keys, room_left
      FROM unnest(fresh) AS f(k)
      -- Each key's leased jobs: one probe of idx_jobs_key_leased per key (a lateral count,
      -- so the generic plan cannot fall back to reading every leased job of the queue).
      CROSS JOIN LATERAL (
        SELECT count(*)::integer AS n
        FROM jobs j
        WHERE key_limit IS NOT NULL AND j.queue_id = queue AND j.concurrency_key = f.k
          AND j.status IN ('claimed', 'running')
      ) l
      LEFT JOIN queue_rate_windows w ON per_key AND w.queue_id = queue AND w.key = f.k;
      room_at := room_at || array_fill(lock_at, ARRAY[cardinality(fresh)]);
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
    SELECT COALESCE(array_agg(j.id) FILTER (WHERE j.fits), '{{}}'),
           COALESCE(array_agg(j.k) FILTER (WHERE j.fits), '{{}}'),
           COALESCE(array_agg(j.at) FILTER (WHERE j.fits), '{{}}'),
           COALESCE(array_agg(DISTINCT j.k) FILTER (WHERE NOT j.fits), '{{}}')
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
    op.execute(
        "CREATE INDEX idx_jobs_key_leased ON jobs (queue_id, concurrency_key) "
        "WHERE status IN ('claimed', 'running') AND concurrency_key IS NOT NULL"
    )
    op.execute(KEYED_CANDIDATES)


def downgrade() -> None:
    previous = migration_module("0016_flow_per_key_admission_time.py")
    op.execute(previous.KEYED_CANDIDATES)
    op.drop_index("idx_jobs_key_leased", table_name="jobs")
