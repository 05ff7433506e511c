"""Fair shares between projects, with real workers (issue 9's scenario).

Project A floods 20,000 jobs of 0.1 s on a priority-1000 queue; once A holds every slot,
project B enqueues 200 on its priority-0 queue. Two workers with 10 slots each serve both
queues. B's jobs all finish while A still has thousands queued, and while both have work
queued B holds its weight's share of the slots (slot time from the execution rows), within
10%. The twin runs the same scenario with fairness switched off (WORKER_FAIR_SHARES=false):
A's priority wins, B gets nothing, and the same check fails.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import pytest
from tests.factories import make_project, make_queue, make_tenant
from tests.integration.worker.helpers import running_worker, wait_for

from codity.core import NewJob, enqueue_many
from codity.worker import HandlerRegistry, JobContext

A_JOBS = 20_000
B_JOBS = 200
JOB_S = 0.1
WORKERS = 2
SLOTS = 10


@dataclass(frozen=True)
class Run:
    b_share: float  # B's share of the slot time while both had work queued
    b_completed: int
    a_queued_when_b_done: int


def _overlap(start: datetime, end: datetime, lo: datetime, hi: datetime) -> float:
    return max(0.0, (min(end, hi) - max(start, lo)).total_seconds())


async def _scenario(
    db: asyncpg.Connection[Any], database_url: str, *, fair: bool, b_weight: int, wait_s: float
) -> Run:
    tenant = await make_tenant(db)
    project_b = await make_project(db, tenant.org_id, weight=b_weight)
    queue_a = await make_queue(db, tenant.project_id, name="flood", priority=1000)
    queue_b = await make_queue(db, project_b, name="small", priority=0)
    await enqueue_many(db, queue_a, [NewJob("work")] * A_JOBS)

    registry = HandlerRegistry()

    @registry.handler("work")
    async def work(ctx: JobContext) -> None:
        await asyncio.sleep(JOB_S)

    def leased(queue: uuid.UUID) -> Any:
        return db.fetchval(
            "SELECT count(*) FROM jobs WHERE queue_id = $1 AND status IN ('claimed', 'running')",
            queue,
        )

    async def b_done() -> bool:
        done = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE queue_id = $1 AND status = 'completed'", queue_b
        )
        return done == B_JOBS

    settings = {"capacity": SLOTS, "fair_shares": fair, "poll_interval_ms": 100}
    async with (
        running_worker(database_url, registry, **settings),
        running_worker(database_url, registry, **settings),
    ):
        await wait_for(lambda: _at_least(leased(queue_a), WORKERS * SLOTS), timeout_s=20)
        b_from: datetime = await db.fetchval("SELECT clock_timestamp()")
        await enqueue_many(db, queue_b, [NewJob("work")] * B_JOBS)
        deadline = asyncio.get_running_loop().time() + wait_s
        while not await b_done() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        a_queued = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE queue_id = $1 AND status = 'queued'", queue_a
        )
        b_completed = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE queue_id = $1 AND status = 'completed'", queue_b
        )
        # B had work queued until its last claim (or until now, if it never drained).
        b_until: datetime = await db.fetchval(
            """SELECT CASE WHEN count(*) FILTER (WHERE status = 'queued') = 0
                           THEN max(claimed_at) ELSE clock_timestamp() END
               FROM jobs WHERE queue_id = $1""",
            queue_b,
        )
        await asyncio.sleep(JOB_S * 4)  # attempts overlapping the window end and get recorded
    rows = await db.fetch(
        """SELECT queue_id, claimed_at, finished_at FROM job_executions
           WHERE queue_id = ANY($1::uuid[]) AND finished_at > $2 AND claimed_at < $3""",
        [queue_a, queue_b],
        b_from,
        b_until,
    )
    slot_s = {queue_a: 0.0, queue_b: 0.0}
    for r in rows:
        slot_s[r["queue_id"]] += _overlap(r["claimed_at"], r["finished_at"], b_from, b_until)
    total = slot_s[queue_a] + slot_s[queue_b]
    run = Run(
        b_share=slot_s[queue_b] / total if total else 0.0,
        b_completed=b_completed,
        a_queued_when_b_done=a_queued,
    )
    print(f"fair={fair} weight B={b_weight}: {run}")
    return run


async def _at_least(value: Any, n: int) -> bool:
    return bool(await value >= n)


@pytest.mark.parametrize("b_weight", [1, 3])
async def test_a_flood_on_a_priority_1000_queue_leaves_b_its_weights_share(
    db: asyncpg.Connection[Any], database_url: str, b_weight: int
) -> None:
    run = await _scenario(db, database_url, fair=True, b_weight=b_weight, wait_s=30)
    target = b_weight / (1 + b_weight)
    assert run.b_completed == B_JOBS
    assert run.a_queued_when_b_done >= 15_000  # thousands of A's jobs still waiting
    assert abs(run.b_share - target) <= 0.1 * target


async def test_break_it_with_fairness_switched_off_b_starves(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    run = await _scenario(db, database_url, fair=False, b_weight=1, wait_s=3)
    assert run.b_completed < B_JOBS
    assert abs(run.b_share - 0.5) > 0.05
