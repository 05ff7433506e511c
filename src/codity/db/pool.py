"""asyncpg connections and pools, with jsonb decoded to Python values on the way in and out."""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Mapping
from typing import Any

import asyncpg

from codity.db.dsn import plain_dsn, redact
from codity.domain.errors import DatabaseUnavailableError

#: How long to wait for a first connection before saying the database is unreachable.
CONNECT_TIMEOUT_S = 5.0


#: The standard library's JSON scanner, called without json.loads around it (see decode_jsonb).
#: (typeshed names the scanner's own class as its argument; it takes a decoder, for its settings.)
_scan_json = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def decode_jsonb(text: str) -> Any:
    """A jsonb value as PostgreSQL prints it, decoded as json.loads would.

    PostgreSQL prints jsonb as one valid JSON value with nothing around it, so the scanner
    json.loads runs can read it directly: json.loads adds a type check and two regular
    expression matches (the whitespace before and after), which for a small payload cost more
    than the scanning itself (1.0 us of json.loads('{}'), about 1 us of a worker's CPU per
    claimed job). Anything else (a `json` value kept as written, surrounding whitespace,
    trailing text) goes through json.loads, which decodes or raises as always."""
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:  # not a JSON value at the start: json.loads says why
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


async def _init_connection(conn: asyncpg.Connection[Any]) -> None:
    # json keeps its text as written (whitespace and all): json.loads; jsonb is printed by
    # PostgreSQL: decode_jsonb. Every claimed job's payload is a jsonb.
    await conn.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    await conn.set_type_codec(
        "jsonb", encoder=json.dumps, decoder=decode_jsonb, schema="pg_catalog"
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
