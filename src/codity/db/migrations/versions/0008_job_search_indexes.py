"""job search indexes: payload containment (GIN jsonb_path_ops) and error text (partial GIN)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 20:20:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "idx_jobs_payload",
        "jobs",
        ["payload"],
        postgresql_using="gin",
        postgresql_ops={"payload": "jsonb_path_ops"},
    )
    op.create_index(
        "idx_jobs_error_text",
        "jobs",
        [sa.text("to_tsvector('simple'::regconfig, last_error)")],
        postgresql_using="gin",
        postgresql_where=sa.text("last_error IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("idx_jobs_error_text", table_name="jobs")
    op.drop_index("idx_jobs_payload", table_name="jobs")
