"""Thin adapters that run codity's named SQL on the connection an application already holds.

Core logic that must work on an application's own connection (transactional enqueue) is
written once, as a plan that yields `Query` objects and receives their rows (see
`core/enqueue.py`). This module runs such a plan on:

- asyncpg: a `Connection` or a `Pool` (codity's own driver);
- psycopg 3: `AsyncConnection` and `Connection`, through psycopg's raw cursors, which take the
  same `$1` placeholders as asyncpg, so the SQL text is shared byte for byte;
- SQLAlchemy: `AsyncSession` / `AsyncConnection` and `Session` / `Connection`, by unwrapping
  to the driver connection underneath (asyncpg or psycopg) in the session's own transaction.

The optional drivers are recognised by their module name and imported only when such a
connection is handed in, so psycopg and SQLAlchemy's asyncio extras stay optional.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

import asyncpg

from codity.db.queries import spliced
from codity.domain.errors import ConfigurationError

T = TypeVar("T")
Row = Mapping[str, Any]


@dataclass(frozen=True)
class Query:
    """One named statement (`db/sql/*.sql`), the named fragments spliced into it (see
    `db.queries.spliced`), and its positional arguments."""

    name: str
    args: tuple[Any, ...]
    fragments: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return spliced(self.name, *self.fragments)


@dataclass(frozen=True)
class Send:
    """Start `query` without waiting for its rows (the plan receives [] at once); the plan
    then does CPU work while the server runs it, and collects the rows with `RECEIVE`. At most
    one query is in flight: one connection runs one statement at a time."""

    query: Query


class _Receive:
    pass


#: Yielded after a `Send`: the plan receives the rows of the query it sent.
RECEIVE: Final = _Receive()

Step = Query | Send | _Receive
#: A plan: yields steps, receives each query's rows, returns its result.
Plan = Generator[Step, list[Row], T]


class AsyncDriver(Protocol):
    async def fetch(self, query: Query) -> list[Row]: ...

    def transaction(self) -> contextlib.AbstractAsyncContextManager[AsyncDriver]: ...


class SyncDriver(Protocol):
    def fetch(self, query: Query) -> list[Row]: ...

    def transaction(self) -> contextlib.AbstractContextManager[SyncDriver]: ...


async def run_async(driver: AsyncDriver, plan: Plan[T], *, atomic: bool) -> T:
    """Run `plan` on `driver`; `atomic` wraps it in a transaction (a savepoint inside the
    caller's open transaction)."""
    if not atomic:
        return await _drive_async(driver, plan)
    async with driver.transaction() as tx:
        return await _drive_async(tx, plan)


async def _drive_async(driver: AsyncDriver, plan: Plan[T]) -> T:
    in_flight: asyncio.Future[list[Row]] | None = None
    try:
        step = next(plan)
        while True:
            if isinstance(step, Send):
                assert in_flight is None, "one query in flight at a time"
                in_flight = asyncio.ensure_future(driver.fetch(step.query))
                await asyncio.sleep(0)  # let it reach the socket before the plan takes the CPU
                step = plan.send([])
            elif isinstance(step, _Receive):
                assert in_flight is not None, "RECEIVE without a Send"
                rows, in_flight = await in_flight, None
                step = plan.send(rows)
            else:
                step = plan.send(await driver.fetch(step))
    except StopIteration as done:
        result: T = done.value
        return result
    finally:
        if in_flight is not None:
            # The plan failed while a statement ran: wait for it, so the connection is free
            # for the rollback that follows.
            await asyncio.wait([in_flight])
            if not in_flight.cancelled():
                in_flight.exception()  # retrieved: the plan's own error is what propagates


def run_sync(driver: SyncDriver, plan: Plan[T], *, atomic: bool) -> T:
    if not atomic:
        return _drive_sync(driver, plan)
    with driver.transaction() as tx:
        return _drive_sync(tx, plan)


def _drive_sync(driver: SyncDriver, plan: Plan[T]) -> T:
    sent: list[Row] | None = None
    try:
        step = next(plan)
        while True:
            if isinstance(step, Send):
                sent = driver.fetch(step.query)  # no overlap without an event loop
                step = plan.send([])
            elif isinstance(step, _Receive):
                assert sent is not None, "RECEIVE without a Send"
                rows, sent = sent, None
                step = plan.send(rows)
            else:
                step = plan.send(driver.fetch(step))
    except StopIteration as done:
        result: T = done.value
        return result


# ------------------------------------------------------------------------------ asyncpg


class AsyncpgDriver:
    def __init__(self, conn: asyncpg.Connection[Any] | asyncpg.Pool[Any]) -> None:
        self._conn = conn

    async def fetch(self, query: Query) -> list[Row]:
        rows: list[Row] = await self._conn.fetch(query.text, *query.args)
        return rows

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncDriver]:
        if isinstance(self._conn, asyncpg.Pool):
            async with self._conn.acquire() as borrowed, borrowed.transaction():
                yield AsyncpgDriver(borrowed)
        else:
            async with self._conn.transaction():
                yield self


# ------------------------------------------------------------------------------ psycopg 3


class PsycopgAsyncDriver:
    """psycopg's AsyncRawCursor takes `$n` placeholders: the same SQL text as asyncpg."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def fetch(self, query: Query) -> list[Row]:
        from psycopg import AsyncRawCursor
        from psycopg.rows import dict_row

        async with AsyncRawCursor(self._conn, row_factory=dict_row) as cur:
            await cur.execute(query.text, query.args)
            if cur.description is None:
                return []
            return list(await cur.fetchall())

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncDriver]:
        if _begins_lazily(self._conn):
            await self._conn.execute(_BEGIN_IMPLICITLY)
        async with self._conn.transaction():
            yield self


def _begins_lazily(conn: Any) -> bool:
    """A psycopg connection outside autocommit whose transaction has not begun yet: psycopg
    begins it on the next statement. `transaction()` on it would open and COMMIT a transaction
    of its own, outliving the application's rollback; once begun, it makes a savepoint."""
    from psycopg.pq import TransactionStatus

    return not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE


#: A statement that does nothing but makes the driver begin the application's transaction.
_BEGIN_IMPLICITLY: Final = "SELECT 1"


class PsycopgDriver:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def fetch(self, query: Query) -> list[Row]:
        from psycopg import RawCursor
        from psycopg.rows import dict_row

        with RawCursor(self._conn, row_factory=dict_row) as cur:
            cur.execute(query.text, query.args)
            if cur.description is None:
                return []
            return list(cur.fetchall())

    @contextlib.contextmanager
    def transaction(self) -> Iterator[SyncDriver]:
        if _begins_lazily(self._conn):
            self._conn.execute(_BEGIN_IMPLICITLY)
        with self._conn.transaction():
            yield self


# ------------------------------------------------------------------------------ choosing


def _module(conn: object) -> str:
    return type(conn).__module__


def _unsupported(conn: object, hint: str) -> ConfigurationError:
    return ConfigurationError(
        f"codity cannot enqueue on a {_module(conn)}.{type(conn).__name__}: {hint}"
    )


def _driver_connection_async(raw: Any) -> AsyncDriver:
    if isinstance(raw, asyncpg.Connection):
        return AsyncpgDriver(raw)
    if _module(raw).startswith("psycopg"):
        return PsycopgAsyncDriver(raw)
    raise _unsupported(raw, "SQLAlchemy must use the asyncpg or psycopg (3) driver")


async def async_driver(conn: Any) -> AsyncDriver:
    """The adapter for an async connection: asyncpg, psycopg's AsyncConnection, or an
    SQLAlchemy AsyncSession / AsyncConnection (its transaction begins if it had not)."""
    if isinstance(conn, asyncpg.Connection | asyncpg.Pool):
        return AsyncpgDriver(conn)
    module = _module(conn)
    if module.startswith("psycopg"):
        if not hasattr(conn, "__aenter__") or type(conn).__name__ != "AsyncConnection":
            raise _unsupported(conn, "use enqueue_sync with a sync psycopg Connection")
        return PsycopgAsyncDriver(conn)
    if module.startswith("sqlalchemy"):
        from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

        if isinstance(conn, AsyncSession):
            conn = await conn.connection()  # joins (or begins) the session's transaction
        if isinstance(conn, AsyncConnection):
            raw = (await conn.get_raw_connection()).driver_connection
            if isinstance(raw, asyncpg.Connection) and not raw.is_in_transaction():
                # SQLAlchemy's asyncpg adapter begins the session's transaction lazily, on its
                # next statement; a statement of ours on the raw connection before that would
                # commit on its own. Make SQLAlchemy begin it (unless the engine autocommits).
                await conn.exec_driver_sql(_BEGIN_IMPLICITLY)
            return _driver_connection_async(raw)
        raise _unsupported(conn, "use enqueue_sync with a sync SQLAlchemy Session/Connection")
    raise _unsupported(
        conn, "pass an asyncpg, psycopg 3 or SQLAlchemy connection (or session) instead"
    )


def sync_driver(conn: Any) -> SyncDriver:
    """The adapter for a sync connection: psycopg's Connection, or an SQLAlchemy Session /
    Connection on the psycopg driver (its transaction begins if it had not)."""
    module = _module(conn)
    if module.startswith("psycopg") and type(conn).__name__ == "Connection":
        return PsycopgDriver(conn)
    if module.startswith("sqlalchemy"):
        from sqlalchemy.engine import Connection
        from sqlalchemy.orm import Session

        if isinstance(conn, Session):
            conn = conn.connection()  # joins (or begins) the session's transaction
        if isinstance(conn, Connection):
            raw = conn.connection.driver_connection
            if _module(raw).startswith("psycopg") and type(raw).__name__ == "Connection":
                return PsycopgDriver(raw)
            raise _unsupported(raw, "a sync SQLAlchemy engine must use the psycopg (3) driver")
    raise _unsupported(conn, "pass a psycopg 3 Connection or an SQLAlchemy Session/Connection")


__all__ = [
    "RECEIVE",
    "AsyncDriver",
    "Plan",
    "Query",
    "Row",
    "Send",
    "SyncDriver",
    "async_driver",
    "run_async",
    "run_sync",
    "sync_driver",
]
