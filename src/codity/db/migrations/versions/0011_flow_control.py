"""flow control: project weight, queue key/rate limits, job concurrency and unique keys, handlers

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 19:20:00

- projects.weight: fair shares between projects on shared workers (default 1).
- queues.key_concurrency_limit, rate_limit_count / rate_limit_period_ms, rate_limit_per_key:
  read by the claim (docs/CONCURRENCY.md).
- jobs.concurrency_key, jobs.unique_key (+ a partial index used only by unique enqueues).
- workers.handlers: the handler names a worker runs (for jobs explain).
- queue_rate_windows: the claim's rate-limit windows (per queue, or per concurrency key).
- Functions the claim calls (db/sql/claim.sql), each a separate step that runs only for a queue
  that configures its feature: codity_rate_slot / codity_rate_used / codity_rate_add (the
  window arithmetic), codity_rate_window (a queue's free starts, read with a FRESH snapshot),
  codity_rate_buckets (claimed jobs counted per window), codity_keyed_candidates (candidate
  selection for queues with per-key limits) and codity_fair_shares (fair shares between
  projects). Why functions: a VOLATILE function reads with a fresh snapshot, taken after the
  claim locked the queue row, so it sees what the previous lock holder committed; and what they
  sort (per-key ranks, the fair-share order) stays out of the plain claim's plan.

Every new column is nullable or has a constant default, so on PostgreSQL 11+ the ALTERs only
touch the catalogue (no table rewrite), even on a large jobs table.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


#: Slots per rate-limit period. A window is counted as RATE_SLOTS + 1 whole slots (the current
#: one and the RATE_SLOTS before it), which covers every window of one period ending now: the
#: limit is never exceeded, and the cost is at most 1/RATE_SLOTS of the throughput (2%).
RATE_SLOTS = 50

RATE_SLOT = f"""
CREATE FUNCTION codity_rate_slot(at timestamptz, period_ms integer) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT floor(extract(epoch FROM at) * 1000 * {RATE_SLOTS} / period_ms)::bigint
$$
"""

RATE_USED = f"""
CREATE FUNCTION codity_rate_used(slot bigint, counts integer[], at_slot bigint) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  -- Starts recorded in the window that ends in slot at_slot: every slot from at_slot - {RATE_SLOTS}
  -- on (newer ones too: if the clock stepped back, counting them errs on the safe side).
  SELECT COALESCE(sum(u.c), 0)::integer
  FROM unnest(counts) WITH ORDINALITY AS u(c, i)
  WHERE slot - (u.i - 1) >= at_slot - {RATE_SLOTS}
$$
"""

RATE_ADD = f"""
CREATE FUNCTION codity_rate_add(slot bigint, counts integer[], at_slot bigint, n integer)
RETURNS integer[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  shift integer;
  out integer[];
BEGIN
  IF counts IS NULL OR at_slot - slot > {RATE_SLOTS} THEN
    out := array_fill(0, ARRAY[{RATE_SLOTS + 1}]);
  ELSIF at_slot <= slot THEN
    -- Not ahead of the newest slot (normally the same slot): count it there, which keeps it
    -- in the window at least as long as its own slot would.
    out := counts;
  ELSE
    shift := (at_slot - slot)::integer;
    out := (array_fill(0, ARRAY[shift]) || counts)[1:{RATE_SLOTS + 1}];
  END IF;
  out[1] := out[1] + n;
  RETURN out;
END
$$
"""

RATE_WINDOW = f"""
CREATE FUNCTION codity_rate_window(queue uuid, bucket text, quota integer, period_ms integer)
RETURNS TABLE (free integer, at timestamptz, next_in_ms double precision)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
-- Plans of the statements inside are made once per session and kept (generic plans:
-- each statement is shaped so its index serves it whatever the values), instead of being
-- planned again on every claim.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  now_slot bigint;
  w_slot bigint;
  w_counts integer[];
  oldest bigint;
BEGIN
  -- The claim holds this lock already (taking it again is free); without it the read below
  -- would not be safe, so the function does not rely on its caller for it.
  PERFORM 1 FROM queues q WHERE q.id = queue FOR UPDATE;
  at := clock_timestamp();  -- after the lock: admissions are stamped in the order they happen
  now_slot := codity_rate_slot(at, period_ms);
  SELECT w.slot, w.counts INTO w_slot, w_counts
  FROM queue_rate_windows w WHERE w.queue_id = queue AND w.key = bucket;
  free := quota - COALESCE(codity_rate_used(w_slot, w_counts, now_slot), 0);
  -- When the oldest start still counted leaves the window (this claim's own, if none).
  SELECT min(w_slot - (u.i - 1)) INTO oldest
  FROM unnest(w_counts) WITH ORDINALITY AS u(c, i)
  WHERE u.c > 0 AND w_slot - (u.i - 1) >= now_slot - {RATE_SLOTS};
  next_in_ms := GREATEST(
    0,
    (COALESCE(oldest, now_slot) + {RATE_SLOTS + 1}) * period_ms / {RATE_SLOTS}.0
      - extract(epoch FROM at) * 1000
  );
  RETURN NEXT;
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

#: Advisory lock class of a (queue, concurrency key) pair: a claim takes jobs of a key only
#: while it holds that key's lock. (1668244585, 'codi', is the unique-jobs class.)
KEY_LOCK_CLASS = 1668244586

KEYED_CANDIDATES = f"""
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

FAIR_SHARES = """
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

FUNCTIONS = {
    "codity_rate_slot(timestamptz, integer)": RATE_SLOT,
    "codity_rate_used(bigint, integer[], bigint)": RATE_USED,
    "codity_rate_add(bigint, integer[], bigint, integer)": RATE_ADD,
    "codity_rate_window(uuid, text, integer, integer)": RATE_WINDOW,
    "codity_rate_buckets(text[], boolean)": RATE_BUCKETS,
    "codity_keyed_candidates(uuid, integer, integer, integer, integer, boolean)": KEYED_CANDIDATES,
    "codity_fair_shares(uuid[], integer[], integer)": FAIR_SHARES,
}


def upgrade() -> None:
    op.add_column(
        "projects", sa.Column("weight", sa.Integer(), server_default=sa.text("1"), nullable=False)
    )
    op.create_check_constraint(
        op.f("ck_projects_weight_range"), "projects", "weight BETWEEN 1 AND 1000"
    )

    op.add_column("queues", sa.Column("key_concurrency_limit", sa.Integer(), nullable=True))
    op.add_column("queues", sa.Column("rate_limit_count", sa.Integer(), nullable=True))
    op.add_column("queues", sa.Column("rate_limit_period_ms", sa.Integer(), nullable=True))
    op.add_column(
        "queues",
        sa.Column(
            "rate_limit_per_key", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
    )
    op.create_check_constraint(
        op.f("ck_queues_key_concurrency_limit_positive"),
        "queues",
        "key_concurrency_limit IS NULL OR key_concurrency_limit > 0",
    )
    op.create_check_constraint(
        op.f("ck_queues_rate_limit_shape"),
        "queues",
        "(rate_limit_count IS NULL) = (rate_limit_period_ms IS NULL)"
        " AND (rate_limit_count IS NULL OR (rate_limit_count > 0 AND rate_limit_period_ms > 0))",
    )

    op.add_column("jobs", sa.Column("concurrency_key", sa.Text(), nullable=True))
    op.add_column("jobs", sa.Column("unique_key", sa.Text(), nullable=True))
    op.create_index(
        "idx_jobs_unique",
        "jobs",
        ["queue_id", "unique_key", sa.text("created_at DESC")],
        unique=False,
        postgresql_where=sa.text("unique_key IS NOT NULL"),
    )

    op.add_column(
        "workers",
        sa.Column(
            "handlers",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
    )

    op.create_table(
        "queue_rate_windows",
        sa.Column("queue_id", sa.UUID(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("slot", sa.BigInteger(), nullable=False),
        sa.Column("counts", postgresql.ARRAY(sa.Integer()), nullable=False),
        sa.ForeignKeyConstraint(
            ["queue_id"],
            ["queues.id"],
            name=op.f("fk_queue_rate_windows_queue_id_queues"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("queue_id", "key", name=op.f("pk_queue_rate_windows")),
    )
    for definition in FUNCTIONS.values():
        op.execute(definition)


def downgrade() -> None:
    for signature in reversed(FUNCTIONS):
        op.execute(f"DROP FUNCTION IF EXISTS {signature}")
    op.drop_table("queue_rate_windows")
    op.drop_column("workers", "handlers")
    op.drop_index("idx_jobs_unique", table_name="jobs")
    op.drop_column("jobs", "unique_key")
    op.drop_column("jobs", "concurrency_key")
    op.drop_constraint(op.f("ck_queues_rate_limit_shape"), "queues", type_="check")
    op.drop_constraint(op.f("ck_queues_key_concurrency_limit_positive"), "queues", type_="check")
    op.drop_column("queues", "rate_limit_per_key")
    op.drop_column("queues", "rate_limit_period_ms")
    op.drop_column("queues", "rate_limit_count")
    op.drop_column("queues", "key_concurrency_limit")
    op.drop_constraint(op.f("ck_projects_weight_range"), "projects", type_="check")
    op.drop_column("projects", "weight")
