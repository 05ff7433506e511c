"""engine: an execution row's key is (job_id, execution_seq)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03 10:30:00

`execution_seq` is the identity of an attempt (ADR-8) and (job_id, execution_seq) was already
unique; the surrogate `id` beside it was read by nothing and cost every execution row a
sequence draw and a second unique index entry (1.5 us of PostgreSQL CPU per job in the engine
loop: docs/DESIGN_DECISIONS.md, ADR-20). The primary key is now (job_id, execution_seq).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_constraint("pk_job_executions", "job_executions", type_="primary")
    op.drop_constraint("uq_job_executions_job_id_execution_seq", "job_executions", type_="unique")
    op.drop_column("job_executions", "id")
    op.create_primary_key("pk_job_executions", "job_executions", ["job_id", "execution_seq"])


def downgrade() -> None:
    op.drop_constraint("pk_job_executions", "job_executions", type_="primary")
    op.add_column(
        "job_executions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
    )
    op.create_primary_key("pk_job_executions", "job_executions", ["id"])
    op.create_unique_constraint(
        "uq_job_executions_job_id_execution_seq", "job_executions", ["job_id", "execution_seq"]
    )
