"""asyncpg connections and pools, with jsonb decoded to Python values on the way in and out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import asyncpg

from codity.db.dsn import plain_dsn, redact
from codity.domain.errors import DatabaseUnavailableError

#: How long to wait for a first connection before saying the database is unreachable.
CONNECT_TIMEOUT_S = 5.0


async def _init_connection(conn: asyncpg.Connection[Any]) -> None:
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(
            type_name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )


def _statement_cache_size(given: int | None) -> int:
    """DATABASE_STATEMENT_CACHE_SIZE unless the caller says: 0 behind PgBouncer in transaction
    mode, where asyncpg then uses unnamed statements only (Parse/Describe/Flush and
    Bind/Execute/Sync: one server connection from parse to sync)."""
    if given is not None:
        return given
    from codity.settings import get_settings

    return get_settings().database_statement_cache_size


def caches_statements() -> bool:
    """Whether connections keep their prepared statements (DATABASE_STATEMENT_CACHE_SIZE > 0:
    not behind PgBouncer in transaction mode)."""
    return _statement_cache_size(None) > 0


async def connect(
    url: str,
    *,
    application_name: str = "codity",
    statement_cache_size: int | None = None,
    command_timeout_s: float | None = None,
) -> asyncpg.Connection[Any]:
    """One connection; raises `DatabaseUnavailableError` with a readable message on failure.
    `command_timeout_s`: a statement whose reply has not arrived by then raises TimeoutError
    (client side: it also ends a wait on a connection that went silent)."""
    try:
        conn: asyncpg.Connection[Any] = await asyncpg.connect(
            plain_dsn(url),
            timeout=CONNECT_TIMEOUT_S,
            command_timeout=command_timeout_s,
            server_settings={"application_name": application_name},
            statement_cache_size=_statement_cache_size(statement_cache_size),
        )
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise DatabaseUnavailableError(
            f"cannot connect to PostgreSQL at {redact(url)}: {exc}"
        ) from exc
    try:
        await _init_connection(conn)
    except BaseException:
        conn.terminate()  # dropped while being set up: never leak a half-made connection
        raise
    return conn


async def create_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    application_name: str = "codity",
    statement_cache_size: int | None = None,
    server_settings: Mapping[str, str] | None = None,
    command_timeout_s: float | None = None,
) -> asyncpg.Pool[Any]:
    """A pool; raises `DatabaseUnavailableError` with a readable message on failure.
    `server_settings`: run-time parameters sent at connection start (beside application_name);
    `command_timeout_s`: the client's deadline per statement (asyncpg cancels it on the server)."""
    try:
        pool: asyncpg.Pool[Any] = await asyncpg.create_pool(
            plain_dsn(url),
            min_size=min_size,
            max_size=max_size,
            init=_init_connection,
            timeout=CONNECT_TIMEOUT_S,
            command_timeout=command_timeout_s,
            server_settings={**(server_settings or {}), "application_name": application_name},
            statement_cache_size=_statement_cache_size(statement_cache_size),
        )
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise DatabaseUnavailableError(
            f"cannot connect to PostgreSQL at {redact(url)}: {exc}"
        ) from exc
    return pool
