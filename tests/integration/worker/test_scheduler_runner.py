"""`run_scheduler` wires every loop to the database: one in-process run promotes a due job,
reaps an expired lease, declares a silent worker dead and materialises a cron occurrence."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import asyncpg
from tests.factories import make_queue, make_schedule, make_worker
from tests.integration.worker.helpers import wait_for

from codity import core
from codity.scheduler import SchedulerConfig, run_scheduler


async def test_every_loop_does_its_job(db: asyncpg.Connection[Any], database_url: str) -> None:
    queue_id = await make_queue(db)
    delayed = await core.enqueue(db, queue_id, core.NewJob(handler="noop", delay_s=0.2))
    leased = await core.enqueue(db, queue_id, core.NewJob(handler="noop"))
    owner = await make_worker(db)
    await core.claim(
        db, owner, [queue_id], 1, 60_000
    )  # takes `leased` (the delayed one is not due)
    await db.execute(
        "UPDATE jobs SET lock_expires_at = now() - interval '1 second' WHERE id = $1", leased.id
    )
    silent = await make_worker(db, hostname="silent")
    await db.execute(
        "UPDATE workers SET last_heartbeat_at = now() - interval '1 hour' WHERE id = $1", silent
    )
    schedule = await make_schedule(
        db, queue_id, name="nightly", cron="0 3 * * *",
        next_run_at=await db.fetchval("SELECT now() - interval '1 minute'"),
    )  # fmt: skip

    config = SchedulerConfig(
        database_url=database_url,
        tick_ms=50,
        dead_worker_after_ms=60_000,
        keep_finished=timedelta(days=7),
        keep_logs=timedelta(days=7),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_scheduler(config, stop))

    async def all_done() -> bool:
        row = await db.fetchrow(
            """SELECT (SELECT status::text FROM jobs WHERE id = $1) AS delayed,
                      (SELECT status::text FROM jobs WHERE id = $2) AS leased,
                      (SELECT status::text FROM workers WHERE id = $3) AS silent,
                      (SELECT count(*) FROM jobs WHERE schedule_id = $4) AS cron_jobs""",
            delayed.id, leased.id, silent, schedule,
        )  # fmt: skip
        return (row["delayed"], row["leased"], row["silent"], row["cron_jobs"]) == (
            "queued", "queued", "dead", 1,
        )  # fmt: skip

    try:
        await wait_for(all_done, timeout_s=10)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=5)
    lost = await db.fetchval("SELECT status::text FROM job_executions WHERE job_id = $1", leased.id)
    assert lost == "lost"
