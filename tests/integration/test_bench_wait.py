"""The drains' clock (`codity bench throughput`, the processes curve, xmin) stops when every job
is completed: `benchmarks.wait_completed` waits through queued and leased jobs alike, and its
poll reads the jobs not yet done, never the completed ones (polled every 10 ms through a drain,
a count of the completed jobs took a fifth of a core from the drain it timed)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from tests.factories import make_queue, make_worker

from codity import core
from codity.cli import benchmarks
from codity.db.pool import connect
from codity.devtools import explain

#: The probe for queued jobs as EXISTS: EXISTS drops the ORDER BY that leads the planner to
#: idx_jobs_claim, and a sequential scan walks the completed rows to the first queued one.
QUEUED_AS_EXISTS = """
SELECT NOT EXISTS (
         SELECT 1 FROM jobs WHERE status = 'queued'
         ORDER BY queue_id, priority DESC, run_at, id LIMIT 1)
   AND NOT EXISTS (SELECT 1 FROM jobs WHERE status IN ('claimed', 'running'))
"""


async def test_the_clock_runs_until_every_job_is_completed(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    queue_id = await make_queue(db)
    worker_id = await make_worker(db)
    await core.enqueue_many(db, queue_id, [core.NewJob("noop")] * 3)
    poller = await connect(database_url)
    try:
        waiter = asyncio.create_task(benchmarks.wait_completed(poller, 3, interval_s=0.01))
        await asyncio.sleep(0.1)
        assert not waiter.done()  # queued
        claimed = await core.claim(db, worker_id, [queue_id], 3, 30_000)
        await asyncio.sleep(0.1)
        assert not waiter.done()  # leased
        await core.complete(db, [core.Completion(j.fence) for j in claimed[:2]])
        await asyncio.sleep(0.1)
        assert not waiter.done()  # one still leased
        await core.complete(db, [core.Completion(claimed[2].fence)])
        await asyncio.wait_for(waiter, timeout=5)
    finally:
        await poller.close()


async def _seq_scans_of_jobs(db: asyncpg.Connection[Any], statement: str) -> list[str]:
    plan = explain.root_node(await db.fetchval("EXPLAIN (FORMAT JSON) " + statement))
    return [
        n["Node Type"]
        for n in explain.walk(plan)
        if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "jobs"
    ]


async def test_the_poll_reads_the_indexes_of_the_jobs_not_yet_done(
    db: asyncpg.Connection[Any],
) -> None:
    """On a filled table (half of it finished), the probes read idx_jobs_claim and
    idx_jobs_worker_leased; the twin, the queued probe as EXISTS, scans the table."""
    await explain.fill(db, 5_000)
    await db.execute("ANALYZE jobs")
    assert await _seq_scans_of_jobs(db, benchmarks.NOTHING_LEFT) == []
    assert await _seq_scans_of_jobs(db, QUEUED_AS_EXISTS) != []
