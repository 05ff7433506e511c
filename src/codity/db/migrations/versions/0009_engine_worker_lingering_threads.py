"""engine: workers.lingering_threads

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 19:20:00

Sync handlers whose attempt ended (timed out, cancelled, lease lost) while their thread keeps
running: the worker counts them against its capacity and its heartbeat shows them here.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "workers",
        sa.Column("lingering_threads", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("workers", "lingering_threads")
