"""Transactional enqueue on the application's own connection, for every supported driver.

The application writes a row of its own (an order) and enqueues a job in the same transaction:
commit -> the order and the job exist and a real worker runs the job; rollback -> neither
exists and no NOTIFY reached a listening worker. The listener hears the committed enqueue, so
its silence after the rollback means something.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from tests.integration.worker.helpers import running_worker, wait_status

from codity import core
from codity.db.pool import connect
from codity.worker import HandlerRegistry, JobContext

ORDER_SQL = "INSERT INTO orders (ref) VALUES ('o-1')"

#: (commit: bool) -> the enqueued job's id; one per driver. Each enqueues and then writes
#: ORDER_SQL in one transaction on the application's connection, then commits or rolls back.
#: Enqueue comes first on purpose: nothing has opened the transaction yet, and drivers that
#: begin it lazily (psycopg, SQLAlchemy's asyncpg adapter) must still put the job inside it.
Scenario = Callable[[str, uuid.UUID, bool], Awaitable[int]]


async def _asyncpg(url: str, queue_id: uuid.UUID, commit: bool) -> int:
    conn = await asyncpg.connect(url)  # a plain connection: no codity codecs
    try:
        tx = conn.transaction()
        await tx.start()
        job = await core.enqueue(conn, queue_id, core.NewJob("orders.confirm", {"ref": "o-1"}))
        await conn.execute(ORDER_SQL)
        await (tx.commit() if commit else tx.rollback())
        return job.id
    finally:
        await conn.close()


async def _psycopg_async(url: str, queue_id: uuid.UUID, commit: bool) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        job = await core.enqueue(conn, queue_id, core.NewJob("orders.confirm", {"ref": "o-1"}))
        await conn.execute(ORDER_SQL)
        await (conn.commit() if commit else conn.rollback())
        return job.id


def _psycopg_sync_blocking(url: str, queue_id: uuid.UUID, commit: bool) -> int:
    with psycopg.Connection.connect(url) as conn:
        job = core.enqueue_sync(conn, queue_id, core.NewJob("orders.confirm", {"ref": "o-1"}))
        conn.execute(ORDER_SQL)
        conn.commit() if commit else conn.rollback()
        return job.id


async def _psycopg_sync(url: str, queue_id: uuid.UUID, commit: bool) -> int:
    return await asyncio.to_thread(_psycopg_sync_blocking, url, queue_id, commit)


def _sqlalchemy_async(dialect: str) -> Scenario:
    async def scenario(url: str, queue_id: uuid.UUID, commit: bool) -> int:
        engine = create_async_engine(url.replace("postgresql://", f"postgresql+{dialect}://"))
        try:
            async with AsyncSession(engine) as session:
                job = await core.enqueue(
                    session, queue_id, core.NewJob("orders.confirm", {"ref": "o-1"})
                )
                await session.execute(text(ORDER_SQL))
                await (session.commit() if commit else session.rollback())
                return job.id
        finally:
            await engine.dispose()

    return scenario


def _sqlalchemy_sync_blocking(url: str, queue_id: uuid.UUID, commit: bool) -> int:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with Session(engine) as session:
            job = core.enqueue_sync(
                session, queue_id, core.NewJob("orders.confirm", {"ref": "o-1"})
            )
            session.execute(text(ORDER_SQL))
            session.commit() if commit else session.rollback()
            return job.id
    finally:
        engine.dispose()


async def _sqlalchemy_sync(url: str, queue_id: uuid.UUID, commit: bool) -> int:
    return await asyncio.to_thread(_sqlalchemy_sync_blocking, url, queue_id, commit)


SCENARIOS: dict[str, Scenario] = {
    "asyncpg": _asyncpg,
    "psycopg-async": _psycopg_async,
    "psycopg-sync": _psycopg_sync,
    "sqlalchemy-async-asyncpg": _sqlalchemy_async("asyncpg"),
    "sqlalchemy-async-psycopg": _sqlalchemy_async("psycopg"),
    "sqlalchemy-sync-psycopg": _sqlalchemy_sync,
}


@contextlib.asynccontextmanager
async def listening(url: str) -> AsyncIterator[list[str]]:
    heard: list[str] = []
    listener = await connect(url)
    await listener.add_listener(core.NOTIFY_CHANNEL, lambda *args: heard.append(args[3]))
    try:
        yield heard
    finally:
        await listener.close()


@pytest.mark.parametrize("driver", list(SCENARIOS))
async def test_job_exists_if_and_only_if_the_application_commits(
    driver: str, database_url: str, db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    await db.execute("CREATE TABLE orders (id serial PRIMARY KEY, ref text NOT NULL)")
    scenario = SCENARIOS[driver]
    ran: list[Any] = []
    registry = HandlerRegistry()

    @registry.handler("orders.confirm")
    async def confirm(ctx: JobContext) -> None:
        ran.append(ctx.payload)

    async with listening(database_url) as heard, running_worker(database_url, registry):
        rolled_back = await scenario(database_url, queue_id, False)
        await asyncio.sleep(0.3)
        assert await db.fetchval("SELECT count(*) FROM jobs") == 0
        assert await db.fetchval("SELECT count(*) FROM orders") == 0
        assert heard == [], "a rolled-back enqueue must not wake anyone"

        committed = await scenario(database_url, queue_id, True)
        assert committed != rolled_back
        assert await wait_status(db, committed, "completed") == "completed"
        assert ran == [{"ref": "o-1"}]
        assert await db.fetchval("SELECT count(*) FROM orders") == 1
        assert heard == [str(queue_id)]


def _bulk_sqlalchemy_sync(url: str, queue_id: uuid.UUID, jobs: list[core.NewJob]) -> None:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with Session(engine) as session:
            assert len(core.enqueue_many_sync(session, queue_id, jobs)) == len(jobs)
            session.rollback()
    finally:
        engine.dispose()


async def test_a_bulk_enqueue_rolls_back_with_the_application(
    database_url: str, db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    """Several INSERT chunks (and dependencies) run in a savepoint of the caller's transaction,
    even one that nothing had begun yet: all of it goes with the caller's rollback."""
    jobs = [core.NewJob("h", {"i": i}) for i in range(core.INSERT_CHUNK + 10)]
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        assert len(await core.enqueue_many(conn, queue_id, jobs)) == len(jobs)
        await conn.rollback()
    await asyncio.to_thread(_bulk_sqlalchemy_sync, database_url, queue_id, jobs)
    engine = create_async_engine(database_url.replace("postgresql://", "postgresql+asyncpg://"))
    try:
        async with AsyncSession(engine) as session:
            assert len(await core.enqueue_many(session, queue_id, jobs)) == len(jobs)
            await session.rollback()
    finally:
        await engine.dispose()
    assert await db.fetchval("SELECT count(*) FROM jobs") == 0


async def test_an_unsupported_connection_is_refused_clearly(queue_id: uuid.UUID) -> None:
    from codity.domain.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="pass an asyncpg, psycopg 3 or SQLAlchemy"):
        await core.enqueue(object(), queue_id, core.NewJob("h"))
    with pytest.raises(ConfigurationError, match="psycopg 3 Connection or an SQLAlchemy"):
        core.enqueue_sync(object(), queue_id, core.NewJob("h"))
