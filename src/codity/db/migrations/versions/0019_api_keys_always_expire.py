"""api_keys.expires_at NOT NULL: every key expires, whatever wrote its row

Keys created before migration 0010 (and any row written outside the API) had no expiry, and
authentication took NULL for "never": such a key outlived API_KEY_TTL_DAYS for ever. Each one
now expires 90 days (API_KEY_TTL_DAYS' default) after its creation, but not sooner than 7 days
after this upgrade, so a client using an old key is not cut off the moment it runs (the
Settings screen shows the date); the column then refuses NULL.

Revision ID: 0019
Revises: 0017 (becomes 0018 when merged after it)
Create Date: 2026-12-03 13:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "UPDATE api_keys SET expires_at = greatest(created_at + interval '90 days',"
        " now() + interval '7 days') WHERE expires_at IS NULL"
    )
    op.alter_column(
        "api_keys", "expires_at", existing_type=sa.DateTime(timezone=True), nullable=False
    )


def downgrade() -> None:
    op.alter_column(
        "api_keys", "expires_at", existing_type=sa.DateTime(timezone=True), nullable=True
    )
