"""chart rollups: queue_stats, handler_stats, worker_stats and the rollup watermark

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 18:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _grain() -> list[sa.Column[object]]:
    return [
        sa.Column("grain", sa.SmallInteger(), nullable=False),
        sa.Column("bucket", sa.DateTime(timezone=True), nullable=False),
    ]


def _counts() -> list[sa.Column[object]]:
    return [
        sa.Column("completed", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("failed", sa.Integer(), server_default=sa.text("0"), nullable=False),
    ]


def _queue_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["queue_id"], ["queues.id"], name=op.f(f"fk_{table}_queue_id_queues"), ondelete="CASCADE"
    )


def upgrade() -> None:
    op.create_table(
        "queue_stats",
        sa.Column("queue_id", sa.UUID(), nullable=False),
        *_grain(),
        sa.Column("depth", sa.Integer(), nullable=True),
        sa.Column("running", sa.Integer(), nullable=True),
        *_counts(),
        sa.Column("wait_hist", postgresql.ARRAY(sa.Integer()), nullable=False),
        sa.CheckConstraint("grain IN (1, 15, 60)", name=op.f("ck_queue_stats_grain")),
        _queue_fk("queue_stats"),
        sa.PrimaryKeyConstraint("queue_id", "grain", "bucket", name=op.f("pk_queue_stats")),
    )
    op.create_table(
        "handler_stats",
        sa.Column("queue_id", sa.UUID(), nullable=False),
        sa.Column("handler", sa.Text(), nullable=False),
        *_grain(),
        *_counts(),
        sa.Column("run_hist", postgresql.ARRAY(sa.Integer()), nullable=False),
        sa.CheckConstraint("grain IN (1, 15, 60)", name=op.f("ck_handler_stats_grain")),
        _queue_fk("handler_stats"),
        sa.PrimaryKeyConstraint(
            "queue_id", "grain", "bucket", "handler", name=op.f("pk_handler_stats")
        ),
    )
    op.create_table(
        "worker_stats",
        sa.Column("queue_id", sa.UUID(), nullable=False),
        sa.Column("worker_id", sa.UUID(), nullable=False),
        *_grain(),
        *_counts(),
        sa.Column("in_flight", sa.Integer(), nullable=True),
        sa.CheckConstraint("grain IN (1, 15, 60)", name=op.f("ck_worker_stats_grain")),
        _queue_fk("worker_stats"),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_worker_stats_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "queue_id", "grain", "bucket", "worker_id", name=op.f("pk_worker_stats")
        ),
    )
    op.create_table(
        "stats_rollup_state",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("done_until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_stats_rollup_state")),
    )


def downgrade() -> None:
    op.drop_table("stats_rollup_state")
    op.drop_table("worker_stats")
    op.drop_table("handler_stats")
    op.drop_table("queue_stats")
