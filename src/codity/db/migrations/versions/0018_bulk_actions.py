"""bulk_actions: retry/cancel/delete (jobs), replay/discard (dead letters) on a frozen filter

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 13:00:00

The API runs a bulk action in chunks (at most BULK_ACTION_CHUNK rows per transaction, FOR
UPDATE SKIP LOCKED); this row holds the frozen filter, the keyset position and the counts,
written in the same transaction as each chunk (docs/DASHBOARD.md, "Bulk actions").
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    uuid = postgresql.UUID(as_uuid=True)
    ts = sa.DateTime(timezone=True)
    op.create_table(
        "bulk_actions",
        sa.Column("id", uuid, server_default=sa.func.gen_random_uuid(), nullable=False),
        sa.Column("project_id", uuid, nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("filter", postgresql.JSONB(), nullable=True),
        sa.Column("ids", postgresql.JSONB(), nullable=True),
        sa.Column("queue_id", uuid, nullable=True),
        sa.Column("high_water_id", sa.BigInteger(), nullable=True),
        sa.Column("frozen_at", ts, server_default=sa.func.now(), nullable=False),
        sa.Column("position", postgresql.JSONB(), nullable=True),
        sa.Column("matched", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("processed", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("skipped", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("chunks", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_by", uuid, nullable=True),
        sa.Column("created_by_api_key", uuid, nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("heartbeat_at", ts, nullable=True),
        sa.Column("created_at", ts, server_default=sa.func.now(), nullable=False),
        sa.Column("started_at", ts, nullable=True),
        sa.Column("finished_at", ts, nullable=True),
        sa.Column("updated_at", ts, server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("target IN ('jobs', 'dead_letters')", name="ck_bulk_actions_target"),
        sa.CheckConstraint(
            "(target = 'jobs' AND action IN ('retry', 'cancel', 'delete'))"
            " OR (target = 'dead_letters' AND action IN ('replay', 'discard'))",
            name="ck_bulk_actions_action",
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'completed', 'stopped', 'failed')",
            name="ck_bulk_actions_status",
        ),
        sa.CheckConstraint(
            "(filter IS NULL) <> (ids IS NULL)", name="ck_bulk_actions_filter_or_ids"
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name="fk_bulk_actions_project_id_projects",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["created_by"],
            ["users.id"],
            name="fk_bulk_actions_created_by_users",
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["created_by_api_key"],
            ["api_keys.id"],
            name="fk_bulk_actions_created_by_api_key_api_keys",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_bulk_actions"),
    )
    op.create_index(
        "ix_bulk_actions_project_id_created_at",
        "bulk_actions",
        ["project_id", sa.text("created_at DESC")],
    )
    op.create_index(
        "ix_bulk_actions_open",
        "bulk_actions",
        ["created_at"],
        postgresql_where=sa.text("status IN ('pending', 'running')"),
    )


def downgrade() -> None:
    op.drop_table("bulk_actions")
