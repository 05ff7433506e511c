"""engine: the payload search's GIN leaves out leased jobs, so a claim writes no entry in it

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-07 14:00:00

`idx_jobs_payload` (GIN, jsonb_path_ops) held a version of every job. A claim and a running
mark change `status`, an indexed column, so neither is a HOT update: each new row version got
the payload's entries again, one per path-and-value (a 1 KB payload of an order has about
twenty), in the index's pending list, later merged into the tree, and the version it replaced
left its own for vacuum to remove.

The index is now partial: `WHERE status NOT IN ('claimed', 'running')`. A job gets its entries
when it is enqueued and again when its attempt ends (completed, failed back to queued or
scheduled, dead-lettered, cancelled); the claim and the running mark, whose new versions are
leased, write none. The payload search reads the leased jobs, as many as the fleet's capacity
whatever the history, through `idx_jobs_worker_leased`, the partial index of exactly those
(api_jobs.sql: api_jobs_list_by_payload, api_jobs_when_payload).

The drain (`bench/drain_variants.py`, the index as it was put back: bench/variants/
payload_gin_full.sql): 1.154x with payloads of about 1 KB, 1.056x with empty ones
(docs/DESIGN_DECISIONS.md, ADR-26).

The index is rebuilt: writes to `jobs` wait while a GIN over every job not leased is built
(plan it for a quiet moment on a large history, as any index build).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("idx_jobs_payload", table_name="jobs")
    op.execute(
        "CREATE INDEX idx_jobs_payload ON jobs USING gin (payload jsonb_path_ops) "
        "WHERE status NOT IN ('claimed', 'running')"
    )


def downgrade() -> None:
    op.drop_index("idx_jobs_payload", table_name="jobs")
    op.execute("CREATE INDEX idx_jobs_payload ON jobs USING gin (payload jsonb_path_ops)")
