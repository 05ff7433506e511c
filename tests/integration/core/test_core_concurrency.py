"""The problem Codity exists to solve, proven on a real PostgreSQL.

N workers asking at the same instant never get the same job; a limit-5 queue never runs 6.
Each proof has a break-it twin that points the same harness at a broken mechanism and must
see the failure, so a detector that cannot fail would be caught.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue
from tests.integration.core.claim_race import core_claim, naive_claim, race
from tests.integration.core.helpers import new_worker

from codity.core import Completion, NewJob, claim, complete, enqueue_many, mark_running
from codity.db.pool import create_pool


async def _setup(
    pool: asyncpg.Pool[Any], jobs: int, loops: int
) -> tuple[uuid.UUID, list[uuid.UUID]]:
    queue_id = await make_queue(pool)
    # max_attempts 100 so the naive claim's repeated claims are not stopped by the CHECK first
    await enqueue_many(
        pool, queue_id, [NewJob("race", {"i": i}, max_attempts=100) for i in range(jobs)]
    )
    workers = [await new_worker(pool) for _ in range(loops)]
    return queue_id, workers


@pytest.mark.parametrize("run", range(5))
async def test_1000_jobs_10_loops_no_job_claimed_twice(pool: asyncpg.Pool[Any], run: int) -> None:
    queue_id, workers = await _setup(pool, 1000, 10)
    report = await race(pool, queue_id, workers, core_claim, batch=10)
    print(f"run {run}: {report}")
    assert report.claimed == 1000
    assert report.duplicates_in_process == 0
    assert report.claimed_twice_in_db == 0
    assert report.distinct_claimers == 10
    assert report.left_queued == 0
    assert sum(report.distribution) == 1000


@pytest.mark.slow
async def test_20000_jobs_32_loops_no_job_claimed_twice(database_url: str) -> None:
    pool = await create_pool(database_url, min_size=32, max_size=32)
    try:
        queue_id, workers = await _setup(pool, 20_000, 32)
        report = await race(pool, queue_id, workers, core_claim, batch=25)
        print(report)
        assert report.claimed == 20_000
        assert report.duplicates_in_process == 0
        assert report.claimed_twice_in_db == 0
        assert report.distinct_claimers == 32
        assert report.left_queued == 0
    finally:
        await pool.close()


async def test_break_it_naive_select_then_update_hands_out_duplicates(
    pool: asyncpg.Pool[Any],
) -> None:
    queue_id, workers = await _setup(pool, 1000, 10)
    report = await race(pool, queue_id, workers, naive_claim, batch=10)
    print(f"naive: {report}")
    # both detectors see it
    assert report.duplicates_in_process > 0
    assert report.claimed_twice_in_db > 0
    assert report.handed_out > report.claimed


LIMIT = 5


async def _limit_race(pool: asyncpg.Pool[Any], claim_fn: Any, loops: int, rounds: int) -> int:
    """Loops claim, run and complete jobs of a limit-5 queue; returns the most seen running."""
    queue_id = await make_queue(pool, concurrency_limit=LIMIT)
    await enqueue_many(pool, queue_id, [NewJob("limited") for _ in range(loops * rounds)])
    workers = [await new_worker(pool) for _ in range(loops)]
    held = 0  # jobs claimed and not yet handed to complete(): all certainly still leased
    most = 0
    start = asyncio.Event()

    async def loop(worker_id: uuid.UUID) -> None:
        nonlocal held, most
        async with pool.acquire() as conn:
            await start.wait()
            for _ in range(rounds):
                jobs = await claim_fn(conn, worker_id, queue_id)
                held += len(jobs)
                leased = await conn.fetchval(
                    "SELECT count(*) FROM jobs WHERE queue_id = $1 AND status IN ('claimed', 'running')",
                    queue_id,
                )
                most = max(most, held, leased)
                if jobs:
                    await mark_running(conn, [j.fence for j in jobs])
                    await asyncio.sleep(0.001)  # the handler runs
                    held -= len(jobs)
                    await complete(conn, [Completion(j.fence) for j in jobs])
                else:
                    await asyncio.sleep(0.001)

    tasks = [asyncio.create_task(loop(w)) for w in workers]
    await asyncio.sleep(0.05)
    start.set()
    await asyncio.gather(*tasks)
    return most


async def test_limit_5_queue_raced_by_20_loops_never_runs_6(database_url: str) -> None:
    pool = await create_pool(database_url, min_size=20, max_size=20)
    try:

        async def limited(conn: Any, worker_id: uuid.UUID, queue_id: uuid.UUID) -> list[Any]:
            return await claim(conn, worker_id, [queue_id], 3, 30_000)

        most = await _limit_race(pool, limited, loops=20, rounds=40)
        assert 0 < most <= LIMIT
    finally:
        await pool.close()


def _broken_claim(broken_sql: str) -> Any:
    from codity.core.claim import _job

    async def claim_fn(conn: Any, worker_id: uuid.UUID, queue_id: uuid.UUID) -> list[Any]:
        rows = await conn.fetch(broken_sql, worker_id, 30_000, [queue_id], 3, None, None, None)
        return [_job(r, worker_id) for r in rows]

    return claim_fn


#: The claim's count of leased jobs, taken with the statement's own snapshot instead of the
#: fresh one codity_leased_in_queue() takes after the queue row is locked.
STATEMENT_SNAPSHOT_COUNT = (
    "(SELECT count(*) FROM jobs x WHERE x.queue_id = l.id "
    "AND x.status IN ('claimed', 'running'))::integer"
)


async def test_break_it_count_then_claim_without_queue_lock_over_admits(
    database_url: str,
) -> None:
    """Without the queue-row lock, count-then-claim races: proof the limit test can fail."""
    from codity.db.queries import sql

    unlocked = sql("claim_jobs").replace("FOR UPDATE OF q", "")
    assert unlocked != sql("claim_jobs")
    pool = await create_pool(database_url, min_size=20, max_size=20)
    try:
        most = await _limit_race(pool, _broken_claim(unlocked), loops=20, rounds=10)
        assert most > LIMIT
    finally:
        await pool.close()


async def test_break_it_lock_but_count_with_the_statement_snapshot_over_admits(
    database_url: str,
) -> None:
    """With the lock but a count from the statement's snapshot (taken before waiting for the
    lock), a claimer misses the claims its predecessor just committed: the fresh-snapshot
    count is what makes the one-statement claim exact."""
    from codity.db.queries import sql

    stale = sql("claim_jobs").replace("codity_leased_in_queue(l.id)", STATEMENT_SNAPSHOT_COUNT)
    assert stale != sql("claim_jobs")
    pool = await create_pool(database_url, min_size=20, max_size=20)
    try:
        most = await _limit_race(pool, _broken_claim(stale), loops=20, rounds=10)
        assert most > LIMIT
    finally:
        await pool.close()
