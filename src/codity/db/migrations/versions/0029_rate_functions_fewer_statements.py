"""flow: the rate window read and the debit do less per claim

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07 00:20:00

Every claim of a rate-limited queue runs codity_rate_window (after the queue row's lock) and
codity_rate_debit (after the UPDATE). Both did more than their job:

- codity_rate_debit joined every claimed job to `queues` before grouping them into windows: a
  claim of 100 made 100 index probes of `queues` for one window. It now groups the starts per
  (queue, key) first and joins the groups (one or a few) to `queues`.
- codity_rate_window ran four statements: the lock, the window row, codity_rate_used (a
  PL/pgSQL function of its own, with its statement) and the oldest start still counted, the
  last two each unnesting the same array. The window row and both sums are now one statement.
  The lock stays a statement of its own: the window must be read by a statement that starts
  after the lock is granted, or it would miss the previous holder's debit.

Same results (tests/integration/core/test_core_flow_rate.py); codity_rate_used stays for
codity_keyed_candidates. Figures: docs/DESIGN_DECISIONS.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from codity.db.migrate import migration_module

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Slots a window counts beyond the current one (migration 0011's RATE_SLOTS).
RATE_SLOTS = 50

WINDOW_SIGNATURE = "codity_rate_window(uuid, text, integer, integer)"
DEBIT_SIGNATURE = "codity_rate_debit(uuid[], text[], timestamptz[])"

WINDOW_HEAD = """CREATE OR REPLACE FUNCTION codity_rate_window(
  queue uuid, bucket text, quota integer, period_ms integer
)
RETURNS TABLE (free integer, at timestamptz, next_in_ms double precision)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$"""

WINDOW_ONE_READ = f"""
DECLARE
  now_slot bigint;
  used integer;
  oldest bigint;
BEGIN
  -- The claim holds this lock already (taking it again is free); without it the read below
  -- would not be safe, so the function does not rely on its caller for it.
  PERFORM 1 FROM queues q WHERE q.id = queue FOR UPDATE;
  at := clock_timestamp();  -- after the lock: admissions are stamped in the order they happen
  now_slot := codity_rate_slot(at, period_ms);
  -- A new statement (fresh snapshot, after the lock): the starts still counted in the window
  -- ending now (every slot from now_slot - {RATE_SLOTS} on, newer ones too: if the clock
  -- stepped back, counting them errs on the safe side), and the oldest of them.
  SELECT COALESCE(sum(u.c) FILTER (WHERE w.slot - (u.i - 1) >= now_slot - {RATE_SLOTS}), 0),
         min(w.slot - (u.i - 1)) FILTER (WHERE u.c > 0 AND w.slot - (u.i - 1) >= now_slot - {RATE_SLOTS})
    INTO used, oldest
  FROM queue_rate_windows w
  CROSS JOIN LATERAL unnest(w.counts) WITH ORDINALITY AS u(c, i)
  WHERE w.queue_id = queue AND w.key = bucket;
  free := quota - COALESCE(used, 0);
  -- When the oldest start still counted leaves the window (this claim's own, if none).
  next_in_ms := GREATEST(
    0,
    (COALESCE(oldest, now_slot) + {RATE_SLOTS + 1}) * period_ms / {RATE_SLOTS}.0
      - extract(epoch FROM at) * 1000
  );
  RETURN NEXT;
END
"""

DEBIT_HEAD = """CREATE OR REPLACE FUNCTION codity_rate_debit(queue_ids uuid[], keys text[], ats timestamptz[])
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$"""


#: The claim's starts (one element per job claimed: its queue, concurrency key and admission
#: time) added to their windows: one per rate-limited queue, or one per key ('' for jobs
#: without one) with rate_limit_per_key. Called by the claim after its UPDATE, while it still
#: holds each window's lock (the queue row's, or the key's). Grouped per (queue, key) before
#: the join with `queues`.
DEBIT_GROUPED_FIRST = """
DECLARE
  recorded integer;
BEGIN
  WITH starts AS (
    SELECT g.q AS queue_id,
           CASE WHEN qu.rate_limit_per_key THEN COALESCE(g.k, '') ELSE '' END AS key,
           min(g.at) AS at, sum(g.n)::integer AS n, max(qu.rate_limit_period_ms) AS period_ms
    FROM (SELECT u.q, u.k, min(u.at) AS at, count(*)::integer AS n
          FROM unnest(queue_ids, keys, ats) AS u(q, k, at)
          GROUP BY u.q, u.k) g
    JOIN queues qu ON qu.id = g.q
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
"""


def upgrade() -> None:
    op.execute(f"{WINDOW_HEAD}{WINDOW_ONE_READ}$$")
    op.execute(f"{DEBIT_HEAD}{DEBIT_GROUPED_FIRST}$$")


def downgrade() -> None:
    # Migration 0011's window read and migration 0013's debit, with migration 0021's setting.
    for signature, definition in (
        (WINDOW_SIGNATURE, migration_module("0011_flow_control.py").RATE_WINDOW),
        (DEBIT_SIGNATURE, migration_module("0013_flow_claim_functions.py").RATE_DEBIT),
    ):
        op.execute(f"DROP FUNCTION {signature}")
        op.execute(definition)
        op.execute(f"ALTER FUNCTION {signature} SET enable_seqscan = off")
