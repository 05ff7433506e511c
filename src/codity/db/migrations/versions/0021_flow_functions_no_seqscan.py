"""flow control: the flow functions' kept plans do not scan tables sequentially

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04 21:10:00

codity_fair_shares, codity_keyed_candidates, codity_rate_window and codity_rate_debit keep the
plans of their statements for the session (`SET plan_cache_mode = force_generic_plan`). A plan
kept from a first call made while a table was small is a sequential scan, and it stays one as
the table grows: fair shares and the rate debit read `queues` whole on every claim in a
session that started on a new database. The worker's own connections set
`enable_seqscan = off` for the session (worker.connection), which the functions inherit; any
other caller's connection (codity.core on a pool) does not. The functions now set it
themselves, like the plan cache mode: every statement in them has an index path.

tests/integration/test_flow_function_plans.py reads the plans inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FLOW_FUNCTIONS = (
    "codity_fair_shares(uuid[], integer[], integer, integer[], timestamptz[], bigint[])",
    "codity_keyed_candidates(uuid, integer, integer, integer, integer, boolean, integer,"
    " timestamptz, bigint)",
    "codity_rate_window(uuid, text, integer, integer)",
    "codity_rate_debit(uuid[], text[], timestamptz[])",
)


def upgrade() -> None:
    for function in FLOW_FUNCTIONS:
        op.execute(f"ALTER FUNCTION {function} SET enable_seqscan = off")


def downgrade() -> None:
    for function in FLOW_FUNCTIONS:
        op.execute(f"ALTER FUNCTION {function} RESET enable_seqscan")
