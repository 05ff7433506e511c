"""When the worker's producer claims: once per job at a trickle, at once when a slot can be used.

A freed slot sets off a claim only while one could find a job (worker.producer); the poll is
set to a minute here, so whatever runs within these tests' bounds was claimed on a NOTIFY or a
freed slot.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import pytest
from tests.factories import make_job, make_queue
from tests.integration.worker.helpers import enqueue, running_worker, wait_status

from codity import core
from codity.worker import producer as producer_module
from codity.worker.context import JobContext
from codity.worker.producer import Producer
from codity.worker.registry import HandlerRegistry
from codity.worker.service import Worker

POLL_MS = 60_000
TRICKLE_JOBS = 20


def _registry() -> HandlerRegistry:
    r = HandlerRegistry()

    @r.handler("quick")
    async def quick(ctx: JobContext) -> None:
        await asyncio.sleep(0.01)

    @r.handler("boom")
    async def boom(ctx: JobContext) -> None:
        raise RuntimeError("failed on purpose")

    return r


def _producer(worker: Worker) -> Producer:
    (producer,) = [c for c in worker._components if isinstance(c, Producer)]
    return producer


@pytest.mark.parametrize("projects", ["one project", "two projects, fair shares"])
@pytest.mark.parametrize("gate", ["on", "off"])
async def test_a_trickle_of_jobs_costs_one_claim_each(
    db: asyncpg.Connection[Any], database_url: str, monkeypatch: Any, gate: str, projects: str
) -> None:
    """Jobs arrive one at a time: each is claimed on its NOTIFY, and the slot it frees sets off
    no claim (the claim that took it drained the queue). Break it ("off": every freed slot wakes
    the producer, as before claim.sql's `drained`): two claims per job, the second empty, and
    at a faster trickle the next job's claim waits behind it. With two projects' queues the
    worker shares its claims between them (WORKER_FAIR_SHARES, on by default), and the jobs
    alternate between the queues: a fair claim drains its queues too."""
    if gate == "off":
        monkeypatch.setattr(
            Producer, "slot_freed", lambda self: self.wake.set() if self.wake else None
        )
    queues = [await make_queue(db)]
    if projects != "one project":
        queues.append(await make_queue(db))  # a project of its own (a new tenant)
    async with running_worker(database_url, _registry(), poll_interval_ms=POLL_MS) as worker:
        producer = _producer(worker)
        await wait_status(db, await enqueue(db, queues[0], "quick"), "completed")
        await asyncio.sleep(0.1)  # the freed slot's claim, if any, is made
        before = producer.claims
        for i in range(TRICKLE_JOBS):
            await wait_status(db, await enqueue(db, queues[i % len(queues)], "quick"), "completed")
        await asyncio.sleep(0.1)
        claims = producer.claims - before
    print(f"gate {gate}: {claims} claims for {TRICKLE_JOBS} jobs")
    if gate == "on":
        assert claims <= TRICKLE_JOBS * 1.15
    else:
        assert claims >= TRICKLE_JOBS * 1.8


@pytest.mark.parametrize("limit", ["concurrency", "key"])
@pytest.mark.parametrize("handler", ["quick", "boom"])
async def test_a_job_held_back_by_its_queues_limit_starts_as_soon_as_one_ends(
    db: asyncpg.Connection[Any], database_url: str, handler: str, limit: str
) -> None:
    """A queue with a concurrency limit of 1 (or a key limit of 1, every job on one key): each
    job ending (completed, or failed to the dead
    letters) NOTIFYs its queue (outcomes.sql `freed`), and the next job starts at once, the
    poll a minute away. Break it: without that NOTIFY the claim the freed slot sets off runs
    before the completion is written, finds the queue at its limit, and the next job waits for
    the poll (each job but the first then waited out the poll)."""
    if limit == "concurrency":
        queue_id, key = await make_queue(db, concurrency_limit=1), None
    else:
        queue_id, key = await make_queue(db, key_concurrency_limit=1), "k"
    ids = [
        await enqueue(db, queue_id, handler, max_attempts=1, concurrency_key=key) for _ in range(5)
    ]
    async with running_worker(database_url, _registry(), capacity=4, poll_interval_ms=POLL_MS):
        started = time.monotonic()
        for job in ids:
            await wait_status(db, job, "completed", "dead_letter", timeout_s=20)
        took = time.monotonic() - started
    assert took < 10, f"5 jobs of a limited queue took {took:.1f} s"


async def test_a_promoted_job_behind_the_cursor_starts_before_the_poll(
    db: asyncpg.Connection[Any], database_url: str, monkeypatch: Any
) -> None:
    """A scheduled job older than the jobs the worker already took is promoted: its NOTIFY's
    claim starts after the queue's cursor and drains without it, and no freed slot wakes a
    drained producer. The claim without cursors that the drained claim set a timer for finds
    it. Break it (no timer): it waits for the poll, a minute away (CI saw a promoted job wait
    out a 30 s poll through PgBouncer)."""
    monkeypatch.setattr(producer_module, "CURSOR_RESCAN_S", 4.0)  # the NOTIFY's claim uses cursors
    queue_id = await make_queue(db)
    behind = await make_job(db, queue_id, handler="quick", status="scheduled")  # run_at now()
    async with running_worker(database_url, _registry(), poll_interval_ms=POLL_MS) as worker:
        await wait_status(db, await enqueue(db, queue_id, "quick"), "completed")
        claims = _producer(worker).claims
        assert await core.promote_due(db) == 1
        started = time.monotonic()
        await wait_status(db, behind, "completed", timeout_s=20)
        took = time.monotonic() - started
        assert _producer(worker).claims >= claims + 2  # the NOTIFY's, then the one without cursors
    assert took < 10, f"the promoted job waited {took:.1f} s"


@pytest.mark.parametrize("gate", ["on", "off"])
async def test_a_queue_created_after_the_worker_started_is_served_on_its_first_notify(
    db: asyncpg.Connection[Any], database_url: str, monkeypatch: Any, gate: str
) -> None:
    """A worker serving every queue is running when a new tenant creates its queue and
    enqueues: the NOTIFY names a queue the worker does not know, which sets off a lookup for
    new queues, and the job runs within seconds although the periodic lookup and the poll
    are a minute away. Break it ("off": unknown queues' NOTIFYs ignored, as before): the job
    waits for the periodic lookup (CI saw a new project's jobs wait out its 10 s)."""
    if gate == "off":
        monkeypatch.setattr(Producer, "queue_unknown", lambda self: None)
    async with running_worker(
        database_url, _registry(), poll_interval_ms=POLL_MS, queue_refresh_ms=POLL_MS
    ) as worker:
        queue_id = await make_queue(db)  # a project of its own, created after the worker
        job = await enqueue(db, queue_id, "quick")
        if gate == "on":
            await wait_status(db, job, "completed", timeout_s=10)
            # a second queue notifies within the gap: looked for 1 s after the first lookup
            second = await enqueue(db, await make_queue(db), "quick")
            await wait_status(db, second, "completed", timeout_s=10)
            assert queue_id in _producer(worker)._queue_ids()
        else:
            await asyncio.sleep(3)
            assert await db.fetchval("SELECT status::text FROM jobs WHERE id = $1", job) == (
                "queued"
            )
