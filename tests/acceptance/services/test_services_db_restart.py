"""Restart PostgreSQL under a running worker and scheduler: both reconnect and carry on, and no
job is lost. A dedicated throwaway cluster: the suite's shared one must not be restarted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.acceptance.services.own_cluster import OwnCluster, own_cluster
from tests.acceptance.services.service_procs import Procs, wait_for
from tests.factories import make_queue, make_tenant

from codity import core
from codity.db.pool import connect

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster() -> Iterator[OwnCluster]:
    with own_cluster() as c:
        yield c


async def test_worker_and_scheduler_survive_a_database_restart(
    cluster: OwnCluster, tmp_path: Path
) -> None:
    c = cluster
    procs = Procs(tmp=tmp_path, database_url=c.url)
    db = await connect(c.url)
    try:
        tenant = await make_tenant(db)
        queue_id = await make_queue(db, tenant.project_id, name="resilient")
        worker = procs.spawn("worker", "--capacity", "5", name="worker")
        scheduler = procs.spawn("scheduler", name="scheduler")

        async def registered() -> bool:
            return await db.fetchval("SELECT count(*) FROM workers WHERE status = 'active'") == 1

        await wait_for(registered, timeout_s=60, what="the worker")
        job = core.NewJob(handler="sleep", payload={"seconds": 0.1})
        before = await core.enqueue_many(db, queue_id, [job] * 40)

        async def some_done() -> bool:
            return await db.fetchval("SELECT count(*) FROM jobs WHERE status = 'completed'") >= 5

        await wait_for(some_done, what="the first jobs")
        await db.close()
        c.restart()  # in-flight jobs are mid-handler right now
        db = await connect(c.url)
        # A delayed job needs the scheduler's promoter (after the restart) to become runnable.
        delayed = await core.enqueue(db, queue_id, core.NewJob(handler="noop", delay_s=0.5))
        after = await core.enqueue_many(db, queue_id, [job] * 20)
        all_ids = [j.id for j in before + after] + [delayed.id]

        async def all_completed() -> bool:
            n = await db.fetchval(
                "SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'completed'", all_ids
            )
            return n == len(all_ids)

        await wait_for(all_completed, timeout_s=60, interval_s=0.2, what="every job completed")
        assert worker.poll() is None, "the worker kept running"
        assert scheduler.poll() is None, "the scheduler kept running"
        assert await db.fetchval("SELECT count(*) FROM dead_letter_jobs") == 0
        worker_log, scheduler_log = procs.logs(worker), procs.logs(scheduler)
        assert "database unavailable" in worker_log or "listening connection lost" in worker_log
        assert "listening again" in worker_log or "listening connection lost" in worker_log
        print(
            "after the restart: worker log lines mentioning the outage:",
            sum("unavailable" in line or "lost" in line for line in worker_log.splitlines()),
            "| scheduler:",
            sum("unavailable" in line for line in scheduler_log.splitlines()),
        )
    finally:
        procs.stop_all()
        await db.close()
