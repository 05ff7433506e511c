"""queue drain: queues.draining_since

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 20:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("queues", sa.Column("draining_since", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("queues", "draining_since")
