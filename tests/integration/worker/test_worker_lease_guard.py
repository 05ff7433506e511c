"""A worker whose leases cannot be renewed stops its attempts before they expire (lease guard),
and a job the same worker claims again stops its own earlier attempt at once.

The heartbeat is made to hang the way it does when the database stops answering: the test holds
the running job's row lock, so the heartbeat's UPDATE waits on it (the lease in the database
keeps its old expiry, as during an outage).
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue
from tests.integration.worker.helpers import enqueue, running_worker, wait_for, wait_status

from codity import core
from codity.worker.context import JobContext
from codity.worker.lease_guard import LeaseGuard
from codity.worker.registry import HandlerRegistry

LEASE_MS = 1500


class Attempts:
    """A handler that waits on a gate and records which attempts ran, ended and were
    cancelled, and whether two attempts of one job ever ran at once."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started: list[int] = []
        self.cancelled: list[int] = []
        self.running: set[int] = set()
        self.overlaps: list[tuple[int, ...]] = []
        self.registry = HandlerRegistry()

        @self.registry.handler("gated")
        async def gated(ctx: JobContext) -> int:
            self.started.append(ctx.execution_seq)
            if self.running:
                self.overlaps.append((*sorted(self.running), ctx.execution_seq))
            self.running.add(ctx.execution_seq)
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.cancelled.append(ctx.execution_seq)
                raise
            finally:
                self.running.discard(ctx.execution_seq)
            return ctx.execution_seq


async def _executions(db: asyncpg.Connection[Any], job_id: int) -> list[tuple[int, str]]:
    rows = await db.fetch(
        "SELECT execution_seq, status::text FROM job_executions WHERE job_id = $1 ORDER BY 1",
        job_id,
    )
    return [(r["execution_seq"], r["status"]) for r in rows]


async def _stall_heartbeats_until_cancelled(
    db: asyncpg.Connection[Any], job_id: int, attempts: Attempts, *, wait_s: float
) -> None:
    """Hold the job's row lock (the heartbeat's UPDATE waits on it) until the first attempt
    is cancelled or `wait_s` passes; then let go."""
    async with db.transaction():
        await db.execute("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", job_id)
        # The worker's heartbeat really is stuck behind the lock (not just slow).
        await wait_for(
            lambda: db.fetchval(
                "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'codity-worker' AND wait_event_type = 'Lock'"
            ),
            timeout_s=5,
        )
        deadline = asyncio.get_running_loop().time() + wait_s
        while not attempts.cancelled and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)


async def test_an_attempt_whose_lease_cannot_be_renewed_is_stopped_before_it_expires(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    attempts = Attempts()
    queue_id = await make_queue(db)
    job = await enqueue(db, queue_id, "gated")
    async with running_worker(
        database_url, attempts.registry, capacity=1, heartbeat_ms=300, lease_ms=LEASE_MS
    ):
        await wait_status(db, job, "running")
        await _stall_heartbeats_until_cancelled(db, job, attempts, wait_s=10 * LEASE_MS / 1000)
        # Stopped while its heartbeats hung, before anyone else could have been given the job.
        assert attempts.cancelled == [1]
        # Once the database answers again the job goes back (a `lost` row, attempt refunded),
        # this worker claims it again and the second attempt completes.
        attempts.gate.set()
        await wait_status(db, job, "completed")
    assert await _executions(db, job) == [(1, "lost"), (2, "completed")]
    assert await db.fetchval("SELECT attempt FROM jobs WHERE id = $1", job) == 1
    assert attempts.overlaps == []


async def test_break_it_without_the_lease_guard_the_attempt_outlives_its_lease(
    db: asyncpg.Connection[Any], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin: with the guard removed, nothing stops the attempt while its lease lapses
    (the reaper could hand the job to another worker meanwhile)."""

    async def idle(self: LeaseGuard) -> bool:
        return False

    monkeypatch.setattr(LeaseGuard, "run_once", idle)
    attempts = Attempts()
    queue_id = await make_queue(db)
    job = await enqueue(db, queue_id, "gated")
    async with running_worker(
        database_url, attempts.registry, capacity=1, heartbeat_ms=300, lease_ms=LEASE_MS
    ):
        await wait_status(db, job, "running")
        await _stall_heartbeats_until_cancelled(db, job, attempts, wait_s=3 * LEASE_MS / 1000)
        assert attempts.cancelled == []
        assert await db.fetchval("SELECT lock_expires_at < now() FROM jobs WHERE id = $1", job)
        attempts.gate.set()
        await wait_status(db, job, "completed")


async def test_a_job_claimed_again_by_the_same_worker_stops_its_earlier_attempt_first(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    """The lease of a running attempt was reaped (forced here; during an outage it happens when
    the database's clock runs ahead of the worker's) and this same worker claims the job again
    before a heartbeat reports the loss: the earlier attempt is stopped before the new one
    starts, the worker counts both while they run, and only the new one is recorded."""
    attempts = Attempts()
    queue_id = await make_queue(db)
    job = await enqueue(db, queue_id, "gated")
    # A slow heartbeat and a quick poll: the producer claims the job again long before a beat.
    async with running_worker(
        database_url,
        attempts.registry,
        capacity=2,
        heartbeat_ms=30_000,
        poll_interval_ms=50,
        lease_ms=60_000,
    ):
        await wait_status(db, job, "running")
        async with db.transaction():
            await db.execute(
                "UPDATE jobs SET lock_expires_at = now() - interval '1 second' WHERE id = $1", job
            )
            assert await core.reap_expired(db) == [job]
        await wait_for(lambda: asyncio.sleep(0, result=attempts.started == [1, 2]))
        await wait_for(lambda: asyncio.sleep(0, result=attempts.cancelled == [1]))
        attempts.gate.set()
        await wait_status(db, job, "completed")
    assert attempts.overlaps == []
    assert await _executions(db, job) == [(1, "lost"), (2, "completed")]
    assert await db.fetchval("SELECT result FROM jobs WHERE id = $1", job) == 2
