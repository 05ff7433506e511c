"""The worker through connection loss and lease loss, deterministically, in-process.

Connection loss is made real with pg_terminate_backend on every connection the worker holds:
the same thing a database restart does to a client.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
from tests.factories import make_queue, make_worker
from tests.integration.worker.helpers import enqueue, running_worker, wait_for, wait_status

from codity import core
from codity.worker.context import JobContext
from codity.worker.registry import HandlerRegistry


def gated_registry(gate: asyncio.Event) -> HandlerRegistry:
    r = HandlerRegistry()

    @r.handler("gated")
    async def gated(ctx: JobContext) -> dict[str, int]:
        await gate.wait()
        return {"seq": ctx.execution_seq}

    @r.handler("quick")
    async def quick(ctx: JobContext) -> None:
        return None

    return r


async def _kill_worker_connections(db: asyncpg.Connection[Any]) -> int:
    killed: int = await db.fetchval(
        """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
           WHERE datname = current_database() AND application_name LIKE 'codity-worker%'"""
    )
    return killed


async def test_results_survive_losing_every_connection_and_notify_comes_back(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    gate = asyncio.Event()
    queue_id = await make_queue(db)
    job = await enqueue(db, queue_id, "gated")
    async with running_worker(database_url, gated_registry(gate), poll_interval_ms=10_000):
        await wait_status(db, job, "running")
        assert await _kill_worker_connections(db) >= 2  # the pool and the LISTEN connection
        gate.set()  # the handler finishes while the worker's connections are gone
        await wait_status(db, job, "completed")
        assert await db.fetchval("SELECT result FROM jobs WHERE id = $1", job) == {"seq": 1}

        # The notifier LISTENs again: with a 10 s poll, only a NOTIFY explains a quick start.
        async def listening() -> bool:
            return bool(
                await db.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name = 'codity-worker-listen'"
                )
            )

        await wait_for(listening)
        started = time.monotonic()
        follow_up = await enqueue(db, queue_id, "quick")
        await wait_status(db, follow_up, "completed", timeout_s=5)
        assert time.monotonic() - started < 2


async def test_a_result_whose_lease_was_lost_is_dropped_not_written(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    gate = asyncio.Event()
    queue_id = await make_queue(db)
    job = await enqueue(db, queue_id, "gated")
    # capacity 1: the gated job fills the only slot, so the requeued job is not re-claimed by
    # this same worker before the test's second worker takes it.
    async with running_worker(database_url, gated_registry(gate), capacity=1) as worker:
        await wait_status(db, job, "running")
        # The lease runs out (as if the worker had stalled), the reaper requeues the job and a
        # second worker takes it: execution_seq 2 now owns the job.
        # In one transaction: the worker's heartbeat (every 100 ms) must not extend the lease
        # between the expiry and the reap; it waits on the row lock and then finds it requeued.
        async with db.transaction():
            await db.execute(
                "UPDATE jobs SET lock_expires_at = now() - interval '1 second' WHERE id = $1", job
            )
            assert await core.reap_expired(db) == [job]
        other = await make_worker(db, hostname="other")
        (taken,) = await core.claim(db, other, [queue_id], 1, 60_000)
        assert taken.execution_seq == 2
        gate.set()  # the first worker's handler now finishes and reports

        assert worker._completer is not None

        async def dropped() -> bool:
            return worker._completer is not None and worker._completer.lease_lost == 1

        await wait_for(dropped)
    row = await db.fetchrow(
        "SELECT status::text, worker_id, execution_seq, result FROM jobs WHERE id = $1", job
    )
    assert (row["status"], row["worker_id"], row["execution_seq"], row["result"]) == (
        "claimed",
        other,
        2,
        None,
    )
    statuses = await db.fetch("SELECT status::text FROM job_executions WHERE job_id = $1", job)
    assert [r["status"] for r in statuses] == ["lost"]  # no 'completed' row from the stale worker
