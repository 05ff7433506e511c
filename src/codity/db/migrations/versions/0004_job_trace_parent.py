"""jobs.trace_parent: the W3C traceparent of the code that enqueued the job (tracing)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 19:20:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable, no default: adding it rewrites nothing, and untraced jobs store nothing.
    op.add_column("jobs", sa.Column("trace_parent", sa.Text(), nullable=True))
    op.create_check_constraint(
        op.f("ck_jobs_trace_parent_length"), "jobs", "octet_length(trace_parent) <= 128"
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_jobs_trace_parent_length"), "jobs", type_="check")
    op.drop_column("jobs", "trace_parent")
