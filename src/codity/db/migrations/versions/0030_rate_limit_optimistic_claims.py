"""flow: a rate-limited queue with room to spare is claimed without its lock

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-07 00:30:00

A queue-wide rate limit made every claimer of the queue take the queue row's lock for its whole
claim (claim_jobs_flow's `limited`), so that each read the window after the previous claimer's
starts were recorded: exact, but claimers of the queue took turns even when the limit was far
away (docs/DESIGN_DECISIONS.md: the lock was the largest part of the limit's cost in a drain).

Now a claim first reads the room left in the window without the lock (codity_rate_room). With
room for ten claims of its size or more it claims without the lock; near the limit it locks and
reads the window after the lock, as before. What keeps it exact either way is checked at the
end: codity_rate_debit adds the claim's starts to their windows (the window row's upsert waits
for any other claim's upsert of it to commit, then adds to its result), and if a window then
holds more than the limit, the claim fails with serialization_failure (40001) and is rolled
back whole: its jobs stay queued. The claimer (core.Claimer) claims again at once with the lock.
Every committed claim has thus seen every start committed before it in its window, which is
what the lock gave. A claim near the limit still takes the lock, so two claims seldom meet there.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from codity.db.migrate import migration_module

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RATE_SLOTS = 50  # migration 0011's

ROOM = f"""
CREATE FUNCTION codity_rate_room(queue uuid, quota integer, period_ms integer) RETURNS integer
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
  at timestamptz := clock_timestamp();
  now_slot bigint;
  used integer;
BEGIN
  -- From a variable: with clock_timestamp() (volatile) as its argument the SQL function
  -- codity_rate_slot is not inlined, and is parsed and planned again on every call.
  now_slot := codity_rate_slot(at, period_ms);
  -- The starts still counted in the queue's window (as codity_rate_window counts them), read
  -- without its lock: only to choose whether the claim takes the lock.
  SELECT COALESCE(sum(u.c) FILTER (WHERE w.slot - (u.i - 1) >= now_slot - {RATE_SLOTS}), 0)
    INTO used
  FROM queue_rate_windows w
  CROSS JOIN LATERAL unnest(w.counts) WITH ORDINALITY AS u(c, i)
  WHERE w.queue_id = queue AND w.key = '';
  RETURN quota - COALESCE(used, 0);
END
$$
"""

DEBIT_CHECKED = """
DECLARE
  recorded integer;
  over boolean;
BEGIN
  -- The claim's starts added to their windows (as migration 0029's), and then the check that
  -- makes a claim without the queue's lock exact: a window over its limit after this claim's
  -- starts fails the claim (it is rolled back whole; the claimer claims again with the lock).
  -- The upsert of a window row waits for another claim's upsert of it to commit and adds to
  -- its result, so the window read here holds every start committed before this claim's.
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
    RETURNING w.queue_id, w.slot, w.counts
  )
  SELECT (SELECT COALESCE(sum(s.n), 0)::integer FROM starts s),
         EXISTS (SELECT 1 FROM written wr JOIN queues qu ON qu.id = wr.queue_id
                 WHERE codity_rate_used(wr.slot, wr.counts, wr.slot) > qu.rate_limit_count)
    INTO recorded, over;
  IF over THEN
    RAISE EXCEPTION 'a rate window would go over its limit: claim again with the queue locked'
      USING ERRCODE = 'serialization_failure';
  END IF;
  RETURN recorded;
END
"""


def upgrade() -> None:
    op.execute(ROOM)
    previous = migration_module("0029_rate_functions_fewer_statements.py")
    op.execute(f"{previous.DEBIT_HEAD}{DEBIT_CHECKED}$$")


def downgrade() -> None:
    previous = migration_module("0029_rate_functions_fewer_statements.py")
    op.execute(f"{previous.DEBIT_HEAD}{previous.DEBIT_GROUPED_FIRST}$$")
    op.execute("DROP FUNCTION codity_rate_room(uuid, integer, integer)")
