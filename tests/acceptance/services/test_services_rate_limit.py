"""A claim rate limit under real worker processes (issue 9's scenario).

Four `codity worker` processes serve a queue limited to 10 starts per second, with far more
jobs queued than the limit lets through. Over the run, no sliding 1 s window of claimed_at (the
admission time the mechanism stamps) holds more than 10 starts, nor does any 0.9 s window of
started_at (when each worker's handler really started, by the worker's own clock: 0.1 s is
left between a claim and its handler's start), and the throughput is within 10% of the limit.

The run lasts CODITY_RATE_LIMIT_S seconds: 15 in `make test`, 60 with `make rate-limit` (the
length issue 9 names). Break it first, with the same processes: before the run, the same
workers drain a queue of the same jobs without the limit, and both detectors must see more
than 10 starts in a window (they would pass a broken limit otherwise). The twins that remove
each part of the mechanism are core-level, in tests/integration/core/test_core_flow_rate.py.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import asyncpg
import pytest
from tests.acceptance.services.service_procs import Procs, wait_workers
from tests.factories import make_queue, make_tenant
from tests.integration.core.test_core_flow_rate import REPLY_S, most_in_any_window
from tests.waiting import wait_for

from codity import core

RUN_S = float(os.environ.get("CODITY_RATE_LIMIT_S", "15"))
COUNT = 10
PERIOD_MS = 1000
WORKERS = 4
TWIN_JOBS = 400

pytestmark = [pytest.mark.slow, pytest.mark.timeout(int(RUN_S) + 120)]


async def _windows(db: asyncpg.Connection[Any], queue_id: uuid.UUID) -> tuple[int, int, list[Any]]:
    """The most starts in a 1 s window of claimed_at and in a 0.9 s window of started_at, and
    every attempt's (claimed_at, started_at)."""
    rows = await db.fetch(
        "SELECT claimed_at, started_at FROM job_executions WHERE queue_id = $1 ORDER BY claimed_at",
        queue_id,
    )
    assert all(r["started_at"] is not None for r in rows)
    by_claim = most_in_any_window([r["claimed_at"] for r in rows], PERIOD_MS / 1000)
    by_start = most_in_any_window([r["started_at"] for r in rows], PERIOD_MS / 1000 - REPLY_S)
    return by_claim, by_start, rows


async def test_4_workers_on_10_per_second_never_start_more_than_10_in_a_second(
    procs: Procs, db: asyncpg.Connection[Any]
) -> None:
    tenant = await make_tenant(db)
    queue_id = await make_queue(db, tenant.project_id, name="rated", rate_limit=(COUNT, PERIOD_MS))
    free_id = await make_queue(db, tenant.project_id, name="free")
    for _ in range(WORKERS):
        procs.spawn("worker", "--capacity", "5", "--queues", "rated,free")
    await wait_workers(db, WORKERS)

    # The twin: the same workers and jobs on a queue without the limit exceed it.
    await core.enqueue_many(db, free_id, [core.NewJob("noop")] * TWIN_JOBS)

    async def drained() -> bool:
        n = await db.fetchval("SELECT count(*) FROM job_executions WHERE queue_id = $1", free_id)
        return bool(n == TWIN_JOBS)

    await wait_for(drained, timeout_s=30)
    twin_claim, twin_start, _ = await _windows(db, free_id)
    print(
        f"without the limit: most in a window: {twin_claim} (claimed_at), {twin_start} (started_at)"
    )
    assert twin_claim > COUNT
    assert twin_start > COUNT

    await core.enqueue_many(db, queue_id, [core.NewJob("noop")] * int(RUN_S * COUNT * 2))
    await asyncio.sleep(RUN_S + 1)
    procs.stop_all()  # SIGTERM: each worker drains and records its last attempts

    most, most_started, rows = await _windows(db, queue_id)
    starts = [r["claimed_at"] for r in rows]
    first = starts[0].timestamp()
    in_run = [s for s in starts if s.timestamp() < first + RUN_S]
    rate = len(in_run) / RUN_S
    lag = max((r["started_at"] - r["claimed_at"]).total_seconds() for r in rows)
    workers = await db.fetchval(
        "SELECT count(DISTINCT worker_id) FROM job_executions WHERE queue_id = $1", queue_id
    )
    print(
        f"{len(in_run)} starts in {RUN_S:.0f} s = {rate:.2f}/s; most in any 1 s of claimed_at: "
        f"{most}, in any {PERIOD_MS / 1000 - REPLY_S:g} s of started_at: {most_started}; "
        f"claim to handler start at most {lag * 1000:.0f} ms; {workers} workers took part"
    )
    assert most <= COUNT
    assert most_started <= COUNT
    assert abs(rate - COUNT) <= 0.1 * COUNT
    assert workers == WORKERS  # every process took part
    # Nothing over the limit was failed or charged: the rest still waits in the queue.
    assert (
        await db.fetchval(
            "SELECT count(*) FROM jobs WHERE queue_id = $1 AND status NOT IN ('completed', 'queued')",
            queue_id,
        )
        == 0
    )
    assert (
        await db.fetchval(
            "SELECT max(attempt) FROM jobs WHERE queue_id = $1 AND status = 'queued'", queue_id
        )
        == 0
    )
