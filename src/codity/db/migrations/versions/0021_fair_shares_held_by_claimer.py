"""fair shares: the claimer says how many jobs it holds per queue instead of the claim counting

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04 18:40:00

`codity bench flow` put the fair shares' cost at 0.87x of the drain (issue 9 asks for at most
10%). About half of codity_fair_shares's time was its `busy` step: every leased job of the
claim's queues read (idx_jobs_queue_status_id) to count each project's load, on every claim.
A worker knows that load for its own slots without reading a row: the jobs it runs, by queue.

codity_fair_shares gains `held` (integer[], aligned with queue_ids): when given, a project's
load is the sum over its queues; when NULL, it is counted as before (a claim made outside a
worker, through codity.core). The water-filling is unchanged, so a worker shares its own
slots between projects by weight; docs/CONCURRENCY.md ("Fair shares") says what that means for
a fleet whose workers serve different queues.

The six-argument function stays: a worker of the previous release, still running during a
rolling deploy, calls it. Its text is 0013's, read from that migration (nothing is copied).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HELD_FAIR = (
    "codity_fair_shares(uuid[], integer[], integer, integer[], timestamptz[], bigint[], integer[])"
)

# The steps of 0013's function that change: its signature, each queue's held count beside its
# cursor, and the project's load (from `held` when given, else counted).
SIGNATURE = (
    "  queue_ids uuid[], quotas integer[], want integer, cps integer[], crs timestamptz[],\n"
    "  cis bigint[]\n)"
)
HELD_SIGNATURE = (
    "  queue_ids uuid[], quotas integer[], want integer, cps integer[], crs timestamptz[],\n"
    "  cis bigint[], held integer[]\n)"
)
QUEUE_COLUMNS = "SELECT u.qid, u.ord, qu.project_id, p.weight,"
HELD_QUEUE_COLUMNS = "SELECT u.qid, u.ord, qu.project_id, p.weight, u.h,"
UNNEST = (
    "    FROM unnest(queue_ids, quotas, cps, crs, cis)\n"
    "         WITH ORDINALITY AS u(qid, quota, cp, cr, ci, ord)"
)
HELD_UNNEST = (
    "    FROM unnest(queue_ids, quotas, cps, crs, cis, held)\n"
    "         WITH ORDINALITY AS u(qid, quota, cp, cr, ci, h, ord)"
)
BUSY = """  busy AS (  -- each project: its jobs leased now in these queues (idx_jobs_queue_status_id)
    SELECT q.project_id, count(*)::integer AS n
    FROM (SELECT j.queue_id FROM jobs j
          WHERE j.queue_id = ANY(queue_ids) AND j.status IN ('claimed', 'running')) l
    JOIN queue q ON q.qid = l.queue_id
    GROUP BY q.project_id
  ),"""
HELD_BUSY = """  busy AS (  -- each project's load: the claimer's own jobs in its queues, when it says so
    SELECT q.project_id, COALESCE(sum(q.h), 0)::integer AS n
    FROM queue q
    WHERE held IS NOT NULL  -- one-time filters: only one of the two branches runs
    GROUP BY q.project_id
    UNION ALL  -- else every job leased now in these queues (idx_jobs_queue_status_id)
    SELECT q.project_id, count(*)::integer AS n
    FROM (SELECT j.queue_id FROM jobs j
          WHERE held IS NULL
            AND j.queue_id = ANY(queue_ids) AND j.status IN ('claimed', 'running')) l
    JOIN queue q ON q.qid = l.queue_id
    GROUP BY q.project_id
  ),"""


def _load(name: str) -> object:
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"codity_migration_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"0013's codity_fair_shares changed: {old.strip()[:60]!r}")
    return text.replace(old, new)


def held_fair_shares() -> str:
    """0013's codity_fair_shares with the `held` argument."""
    text: str = _load("0013_flow_claim_functions.py").NEW_FAIR_SHARES  # type: ignore[attr-defined]
    for old, new in (
        (SIGNATURE, HELD_SIGNATURE),
        (QUEUE_COLUMNS, HELD_QUEUE_COLUMNS),
        (UNNEST, HELD_UNNEST),
        (BUSY, HELD_BUSY),
    ):
        text = _replace_once(text, old, new)
    return text


def upgrade() -> None:
    op.execute(held_fair_shares())


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {HELD_FAIR}")
