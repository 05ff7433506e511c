"""Running a real Worker in-process against the test's database, and waiting for job states."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tests import waiting

from codity import core
from codity.worker.config import WorkerConfig
from codity.worker.registry import HandlerRegistry
from codity.worker.service import Worker


def config(database_url: str, **overrides: Any) -> WorkerConfig:
    values: dict[str, Any] = {
        "database_url": database_url,
        "capacity": 4,
        "queue_names": None,
        "heartbeat_ms": 100,
        "lease_ms": 5000,
        "poll_interval_ms": 200,
        "shutdown_grace_ms": 2000,
        "version": "test",
    }
    values.update(overrides)
    return WorkerConfig(**values)


@contextlib.asynccontextmanager
async def running_worker(
    database_url: str, registry: HandlerRegistry, **overrides: Any
) -> AsyncIterator[Worker]:
    worker = Worker(config(database_url, **overrides), registry)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    ready = asyncio.create_task(worker.ready.wait())
    await asyncio.wait({task, ready}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()  # raise what went wrong
    try:
        yield worker
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)


async def wait_for(
    check: Callable[[], Awaitable[Any]], *, timeout_s: float = 10.0, interval_s: float = 0.05
) -> Any:
    return await waiting.wait_for(check, timeout_s=timeout_s, interval_s=interval_s)


async def job_status(conn: Any, job_id: int) -> str:
    status: str = await conn.fetchval("SELECT status::text FROM jobs WHERE id = $1", job_id)
    return status


async def wait_status(conn: Any, job_id: int, *statuses: str, timeout_s: float = 10.0) -> str:
    async def check() -> str | None:
        s = await job_status(conn, job_id)
        return s if s in statuses else None

    result: str = await wait_for(check, timeout_s=timeout_s)
    return result


async def enqueue(conn: Any, queue_id: Any, handler: str, payload: Any = None, **kw: Any) -> int:
    job = await core.enqueue(
        conn, queue_id, core.NewJob(handler=handler, payload=payload or {}, **kw)
    )
    return job.id
