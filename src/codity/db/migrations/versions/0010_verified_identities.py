"""verified identities: email verification, expiring invitation tokens, session cut-off,
per-account sign-in throttle

Existing accounts are marked verified (they signed in before verification existed) and
existing pending invitations get no token: they can no longer be accepted and must be sent
again (the old ones were accepted by anyone who registered the address).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 19:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("users", sa.Column("email_verified_at", sa.DateTime(timezone=True)))
    op.add_column("users", sa.Column("sessions_valid_after", sa.DateTime(timezone=True)))
    op.execute("UPDATE users SET email_verified_at = created_at")

    op.create_table(
        "email_verifications",
        sa.Column("id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("user_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True)),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_email_verifications_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_email_verifications")),
    )
    op.create_index(
        op.f("ix_email_verifications_user_id"), "email_verifications", ["user_id"], unique=False
    )

    op.add_column("invitations", sa.Column("token_hash", sa.LargeBinary()))
    op.add_column("invitations", sa.Column("expires_at", sa.DateTime(timezone=True)))
    op.add_column("invitations", sa.Column("revoked_at", sa.DateTime(timezone=True)))
    op.add_column("invitations", sa.Column("accepted_by", postgresql.UUID(as_uuid=True)))
    op.execute("UPDATE invitations SET expires_at = created_at + interval '7 days'")
    op.alter_column("invitations", "expires_at", nullable=False)
    op.create_unique_constraint(op.f("uq_invitations_token_hash"), "invitations", ["token_hash"])
    op.create_foreign_key(
        op.f("fk_invitations_accepted_by_users"),
        "invitations",
        "users",
        ["accepted_by"],
        ["id"],
        ondelete="SET NULL",
    )

    op.create_table(
        "login_throttles",
        sa.Column("account", sa.Text(), nullable=False),
        sa.Column("failures", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "next_attempt_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("account", name=op.f("pk_login_throttles")),
    )
    op.create_index(
        op.f("ix_login_throttles_updated_at"), "login_throttles", ["updated_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_login_throttles_updated_at"), table_name="login_throttles")
    op.drop_table("login_throttles")
    op.drop_constraint(op.f("fk_invitations_accepted_by_users"), "invitations", type_="foreignkey")
    op.drop_constraint(op.f("uq_invitations_token_hash"), "invitations", type_="unique")
    op.drop_column("invitations", "accepted_by")
    op.drop_column("invitations", "revoked_at")
    op.drop_column("invitations", "expires_at")
    op.drop_column("invitations", "token_hash")
    op.drop_index(op.f("ix_email_verifications_user_id"), table_name="email_verifications")
    op.drop_table("email_verifications")
    op.drop_column("users", "sessions_valid_after")
    op.drop_column("users", "email_verified_at")
