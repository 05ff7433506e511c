"""What every core function accepts as `conn`, and how it opens a transaction on it.

Core functions take either an asyncpg `Connection` or a `Pool`. Functions that need several
statements to be atomic use `transaction(conn)`: on a pool it borrows one connection for the
duration; on a connection it opens a transaction there, which becomes a savepoint when the
caller already has one open (so a core call inside the caller's transaction commits or rolls
back with it: transactional enqueue).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import asyncpg

Conn: TypeAlias = "asyncpg.Connection[Any] | asyncpg.Pool[Any]"


@asynccontextmanager
async def transaction(conn: Conn) -> AsyncIterator[asyncpg.Connection[Any]]:
    if isinstance(conn, asyncpg.Pool):
        async with conn.acquire() as borrowed, borrowed.transaction():
            yield borrowed
    else:
        async with conn.transaction():
            yield conn
