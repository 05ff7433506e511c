"""People who sign in. SQL: `db/sql/api_users.sql`."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from codity.api.schemas.auth import UserPublic
from codity.core import Conn
from codity.db.queries import bind
from codity.domain.errors import EmailTakenError


async def create_user(
    conn: Conn, *, email: str, password_hash: str, display_name: str | None
) -> UserPublic:
    try:
        row = await bind(
            "api_users_insert", email=email, password_hash=password_hash, display_name=display_name
        ).fetchrow(conn)
    except asyncpg.UniqueViolationError:
        raise EmailTakenError("an account with this email already exists") from None
    return UserPublic(id=row["id"], email=row["email"], name=row["display_name"])


async def credentials(conn: Conn, email: str) -> asyncpg.Record | None:
    """id, password_hash and is_active of the account behind `email`, if any."""
    row: asyncpg.Record | None = await bind("api_users_by_email", email=email).fetchrow(conn)
    return row


async def get_user(conn: Conn, user_id: UUID) -> UserPublic:
    row = await bind("api_users_get", user_id=user_id).fetchrow(conn)
    return UserPublic(id=row["id"], email=row["email"], name=row["display_name"])


async def touch_login(conn: Conn, user_id: UUID) -> None:
    await bind("api_users_touch_login", user_id=user_id).execute(conn)
