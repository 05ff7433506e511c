"""Audit rows for operator actions inside a project (enqueue itself is not audited: volume)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from codity.api.audit import record_audit
from codity.api.principal import ProjectContext
from codity.core import Conn


@asynccontextmanager
async def atomic(pool: asyncpg.Pool[Any]) -> AsyncIterator[asyncpg.Connection[Any]]:
    """One connection in one transaction: a change and its audit row commit together or not at
    all (core functions called on it join the transaction as a savepoint)."""
    async with pool.acquire() as conn, conn.transaction():
        yield conn


async def audit(
    conn: Conn,
    ctx: ProjectContext,
    action: str,
    target_type: str,
    target_id: object,
    **details: Any,
) -> None:
    """Who did `action` to which target of the project; details hold ids and names only."""
    await record_audit(
        conn,
        ctx.principal,
        action,
        project_id=ctx.project_id,
        target_type=target_type,
        target_id=target_id,
        details=details or None,
    )
