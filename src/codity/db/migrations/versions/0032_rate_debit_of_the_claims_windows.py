"""flow: the claim hands the rate debit one row per window, not one per job

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-07 03:00:00

In server instructions (callgrind, a claim of 100 from a queue with a rate limit far above the
drain rate, claims committed and completed as in a drain), the rate limit's whole cost over the
flow statement's claim of a plain queue was the debit: 2.2M of a claim's 18.0M. Most of it was
moving the claim's jobs into the function and back out: three arrays of one element per job
built by the claim, unnested into a tuplestore, grouped per (queue, key), joined with `queues`
and grouped again per window, all for one window row.

The claim now groups its starts per window itself (it knows each queue's settings: the
`settings` CTE the claim decided with), and passes one element per window: its queue, its key
('' for a queue-wide window), its earliest admission time and how many starts.
codity_rate_debit(queue_ids, keys, ats, counts) upserts those rows and checks them as before
(migration 0030): 18.0M -> 16.8-17.0M a claim (`.venv/bin/python bench/flow_instructions.py
--only F,R`; counts of one case move by about 0.3M from run to run with the tables' state).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from codity.db.migrate import migration_module

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PREVIOUS_SIGNATURE = "codity_rate_debit(uuid[], text[], timestamptz[])"

DEBIT_OF_WINDOWS = """
CREATE FUNCTION codity_rate_debit(
  queue_ids uuid[], keys text[], ats timestamptz[], counts integer[]
) RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
  recorded integer;
  over boolean;
BEGIN
  -- One element per window the claim started jobs in: its queue, its key ('' for a queue-wide
  -- window), the earliest admission time of those starts and how many there were (the claim
  -- groups them: claim.sql, the report row). Added to the windows, then checked: a window over
  -- its limit after this claim's starts fails the claim (it is rolled back whole; the claimer
  -- claims again with the queue locked, migration 0030). The upsert of a window row waits for
  -- another claim's upsert of it to commit and adds to its result, so the window read here
  -- holds every start committed before this claim's.
  WITH written AS (
    INSERT INTO queue_rate_windows AS w (queue_id, key, slot, counts)
    SELECT s.q, s.k, codity_rate_slot(s.at, qu.rate_limit_period_ms),
           codity_rate_add(NULL, NULL, codity_rate_slot(s.at, qu.rate_limit_period_ms), s.n)
    FROM unnest(queue_ids, keys, ats, counts) AS s(q, k, at, n)
    JOIN queues qu ON qu.id = s.q
    WHERE qu.rate_limit_count IS NOT NULL
    ON CONFLICT (queue_id, key) DO UPDATE
    SET slot = GREATEST(w.slot, excluded.slot),
        counts = codity_rate_add(w.slot, w.counts, excluded.slot, excluded.counts[1])
    RETURNING w.queue_id, w.slot, w.counts
  )
  SELECT (SELECT COALESCE(sum(c.n), 0)::integer FROM unnest(counts) AS c(n)),
         EXISTS (SELECT 1 FROM written wr JOIN queues qu ON qu.id = wr.queue_id
                 WHERE codity_rate_used(wr.slot, wr.counts, wr.slot) > qu.rate_limit_count)
    INTO recorded, over;
  IF over THEN
    RAISE EXCEPTION 'a rate window would go over its limit: claim again with the queue locked'
      USING ERRCODE = 'serialization_failure';
  END IF;
  RETURN recorded;
END
$$
"""


def upgrade() -> None:
    op.execute(f"DROP FUNCTION {PREVIOUS_SIGNATURE}")
    op.execute(DEBIT_OF_WINDOWS)


def downgrade() -> None:
    op.execute("DROP FUNCTION codity_rate_debit(uuid[], text[], timestamptz[], integer[])")
    # Migration 0030's function (0029's head: its settings).
    head = migration_module("0029_rate_functions_fewer_statements.py").DEBIT_HEAD
    op.execute(f"{head}{migration_module('0030_rate_limit_optimistic_claims.py').DEBIT_CHECKED}$$")
