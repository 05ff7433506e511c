"""Refresh tokens (sessions): opaque, in an httpOnly cookie, stored as HMAC-SHA256 under
JWT_REFRESH_SECRET, grouped in families, one family per sign-in. SQL: `db/sql/api_sessions.sql`."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from codity.core import Conn
from codity.db.queries import bind


async def store(
    conn: Conn,
    *,
    user_id: UUID,
    family_id: UUID,
    token_hash: bytes,
    ttl_s: int,
    user_agent: str | None,
    ip: str | None,
) -> None:
    await bind(
        "api_sessions_insert",
        user_id=user_id,
        family_id=family_id,
        token_hash=token_hash,
        ttl_s=ttl_s,
        user_agent=user_agent,
        ip=ip,
    ).execute(conn)


async def lock(conn: Conn, token_hash: bytes) -> asyncpg.Record | None:
    """The presented token's row (id, user_id, family_id, expires_at, rotated_at, revoked_at,
    account_ok), locked until the caller's transaction ends."""
    row: asyncpg.Record | None = await bind("api_sessions_lock", token_hash=token_hash).fetchrow(
        conn
    )
    return row


async def family_of(conn: Conn, token_hash: bytes) -> UUID | None:
    family: UUID | None = await bind("api_sessions_family_of", token_hash=token_hash).fetchval(conn)
    return family


async def rotate(conn: Conn, session_id: UUID) -> None:
    await bind("api_sessions_rotate", id=session_id).execute(conn)


async def revoke_family(conn: Conn, family_id: UUID) -> None:
    await bind("api_sessions_revoke_family", family_id=family_id).execute(conn)


async def revoke_all(conn: Conn, user_id: UUID) -> None:
    """Every refresh family of the account (password change, sign out everywhere)."""
    await bind("api_sessions_revoke_all", user_id=user_id).execute(conn)
