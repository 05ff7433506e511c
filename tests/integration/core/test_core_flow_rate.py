"""Rate limits: no window of period_s starts more than `count` jobs, across all claimers.

Core-level and short: 4 claimers race on a queue limited to 10 starts per second for about
3 seconds, sleeping until the next start frees up as the claim tells them (as the worker's
producer does). Every sliding 1 s window of claimed_at holds at most 10 starts, and the limit
is used (27+ starts in 3 s). The 60 s run with real worker processes is
tests/acceptance/test_flow_rate_limit.py. The twins remove one part of the mechanism each.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from bisect import bisect_left
from collections.abc import Callable
from datetime import datetime
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue
from tests.integration.core.helpers import new_worker

from codity.core import Claimer, Completion, NewJob, claim_round, complete, enqueue_many
from codity.db.pool import create_pool
from codity.db.queries import sql

COUNT = 10
PERIOD_MS = 1000
CLAIMERS = 4
RUN_S = 3.0


def most_in_any_window(starts: list[datetime], period_s: float) -> int:
    """The most starts inside any half-open window [t, t + period) that begins at a start (a
    window holding the most starts can always be slid to begin at one)."""
    times = sorted(s.timestamp() for s in starts)
    return max((bisect_left(times, t + period_s) - i for i, t in enumerate(times)), default=0)


def test_the_window_count_helper() -> None:
    base = datetime.fromtimestamp(1_000_000).astimezone()
    at = [datetime.fromtimestamp(1_000_000 + s).astimezone() for s in (0, 0.5, 0.999, 1.0, 1.5)]
    assert most_in_any_window(at, 1.0) == 3  # 0, 0.5, 0.999 (1.0 is outside [0, 1))
    assert most_in_any_window([base], 1.0) == 1
    assert most_in_any_window([], 1.0) == 0


async def _rate_race(
    pool: asyncpg.Pool[Any], queue_id: uuid.UUID, run_s: float = RUN_S
) -> list[datetime]:
    """CLAIMERS loops claim (5 at a time) and complete at once for run_s; returns claimed_at
    of every job claimed."""
    workers = [await new_worker(pool) for _ in range(CLAIMERS)]
    start = asyncio.Event()
    deadline = 0.0

    async def loop(worker_id: uuid.UUID) -> None:
        claimer = Claimer(worker_id, 30_000)
        async with pool.acquire() as conn:
            await start.wait()
            while time.monotonic() < deadline:
                got = await claimer.claim(conn, [queue_id], 5)
                if got.jobs:
                    await complete(conn, [Completion(j.fence) for j in got.jobs])
                wait_s = (got.retry_in_ms or 50) / 1000 if len(got.jobs) < 5 else 0
                await asyncio.sleep(min(wait_s, max(0.0, deadline - time.monotonic())))

    tasks = [asyncio.create_task(loop(w)) for w in workers]
    await asyncio.sleep(0.05)
    deadline = time.monotonic() + run_s
    start.set()
    await asyncio.gather(*tasks)
    rows = await pool.fetch(
        "SELECT claimed_at FROM job_executions WHERE queue_id = $1 ORDER BY claimed_at", queue_id
    )
    return [r["claimed_at"] for r in rows]


@pytest.fixture
async def race_pool(database_url: str) -> Any:
    pool = await create_pool(database_url, min_size=CLAIMERS, max_size=CLAIMERS + 1)
    try:
        yield pool
    finally:
        await pool.close()


async def _limited_queue(pool: asyncpg.Pool[Any], jobs: int = 200) -> uuid.UUID:
    queue_id = await make_queue(pool, rate_limit=(COUNT, PERIOD_MS))
    await enqueue_many(pool, queue_id, [NewJob("rated")] * jobs)
    return queue_id


async def test_10_per_second_never_more_than_10_in_any_second_and_the_limit_is_used(
    race_pool: asyncpg.Pool[Any],
) -> None:
    queue_id = await _limited_queue(race_pool)
    starts = await _rate_race(race_pool, queue_id)
    print(f"{len(starts)} starts in {RUN_S} s; most in a window: {most_in_any_window(starts, 1)}")
    assert most_in_any_window(starts, PERIOD_MS / 1000) <= COUNT
    assert len(starts) >= 0.9 * COUNT * RUN_S
    # Over-limit jobs wait in the queue, not failed and not charged an attempt.
    left = await race_pool.fetchrow(
        "SELECT count(*) AS n, max(attempt) AS attempt, min(status::text) AS status "
        "FROM jobs WHERE queue_id = $1 AND status <> 'completed'",
        queue_id,
    )
    assert left["n"] == 200 - len(starts)
    assert (left["attempt"], left["status"]) == (0, "queued")


async def test_a_claim_short_of_starts_says_when_the_next_one_frees_up(
    db: asyncpg.Connection[Any],
) -> None:
    queue_id = await _limited_queue(db, 30)
    worker = await new_worker(db)
    first = await claim_round(db, worker, [queue_id], 50, 30_000)
    assert len(first.jobs) == COUNT
    assert first.retry_in_ms is not None
    assert 0 < first.retry_in_ms <= PERIOD_MS * 1.03
    second = await claim_round(db, worker, [queue_id], 50, 30_000)
    assert second.jobs == []
    assert second.retry_in_ms is not None
    assert second.retry_in_ms <= first.retry_in_ms
    await asyncio.sleep(second.retry_in_ms / 1000 + 0.01)
    third = await claim_round(db, worker, [queue_id], 50, 30_000)
    assert len(third.jobs) == COUNT


async def test_a_per_key_limit_gives_each_key_its_own_window(
    db: asyncpg.Connection[Any],
) -> None:
    queue_id = await make_queue(db, rate_limit=(3, 60_000), rate_limit_per_key=True)
    await enqueue_many(
        db,
        queue_id,
        [NewJob("h", concurrency_key="a")] * 5
        + [NewJob("h", concurrency_key="b")] * 5
        + [NewJob("h")] * 5,  # no key: one shared window
    )
    worker = await new_worker(db)
    got = await claim_round(db, worker, [queue_id], 100, 30_000)
    keys = await db.fetch(
        "SELECT COALESCE(concurrency_key, '') AS k, count(*) AS n FROM jobs "
        "WHERE queue_id = $1 AND status = 'claimed' GROUP BY 1 ORDER BY 1",
        queue_id,
    )
    assert [(r["k"], r["n"]) for r in keys] == [("", 3), ("a", 3), ("b", 3)]
    assert len(got.jobs) == 9
    assert (await claim_round(db, worker, [queue_id], 100, 30_000)).jobs == []


async def _rewrite_function(
    pool: asyncpg.Pool[Any], name: str, rewrite: Callable[[str], str]
) -> None:
    definition = await pool.fetchval(
        "SELECT pg_get_functiondef(oid) FROM pg_proc WHERE proname = $1", name
    )
    broken = rewrite(definition)
    assert broken != definition
    await pool.execute(broken)


async def test_break_it_without_recording_the_starts_the_limit_is_exceeded(
    race_pool: asyncpg.Pool[Any],
) -> None:
    """The debit step made to record nothing: every claim sees a full window."""
    queue_id = await _limited_queue(race_pool)
    await _rewrite_function(
        race_pool,
        "codity_rate_debit",
        lambda d: d.replace("WHERE qu.rate_limit_count IS NOT NULL", "WHERE false"),
    )
    starts = await _rate_race(race_pool, queue_id, run_s=1.0)
    print(f"broken: most in a window: {most_in_any_window(starts, 1)}")
    assert most_in_any_window(starts, PERIOD_MS / 1000) > COUNT


async def test_break_it_reading_the_window_before_the_lock_exceeds_the_limit(
    race_pool: asyncpg.Pool[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claimers read the window, then wait for the lock while the previous holder records its
    starts: two of them spend the same free starts."""
    lock = "PERFORM 1 FROM queues q WHERE q.id = queue FOR UPDATE;"
    read = "FROM queue_rate_windows w WHERE w.queue_id = queue AND w.key = bucket;"
    await _rewrite_function(
        race_pool,
        "codity_rate_window",
        lambda d: d.replace(lock, "").replace(read, f"{read}\n  {lock}\n  PERFORM pg_sleep(0.02);"),
    )
    unlocked = sql("claim_jobs_flow").replace("FOR UPDATE OF q", "")

    def statements(name: str) -> str:
        return unlocked if name == "claim_jobs_flow" else sql(name)

    monkeypatch.setattr(sys.modules["codity.core.claim"], "sql", statements)
    queue_id = await _limited_queue(race_pool)
    starts = await _rate_race(race_pool, queue_id, run_s=1.0)
    print(f"broken: most in a window: {most_in_any_window(starts, 1)}")
    assert most_in_any_window(starts, PERIOD_MS / 1000) > COUNT


async def test_prune_removes_only_windows_that_count_nothing(db: asyncpg.Connection[Any]) -> None:
    from datetime import UTC
    from datetime import datetime as dt

    from codity.core import prune

    fresh = await _limited_queue(db, 5)
    stale = await _limited_queue(db, 5)
    worker = await new_worker(db)
    await claim_round(db, worker, [fresh], 5, 30_000)
    await claim_round(db, worker, [stale], 5, 30_000)
    # Every start of `stale` left its window 51 slots ago (a slot is period / 50 = 20 ms).
    await db.execute("UPDATE queue_rate_windows SET slot = slot - 51 WHERE queue_id = $1", stale)
    now = dt.now(UTC)
    result = await prune(
        db, finished_before=now.replace(year=2000), logs_before=now.replace(year=2000)
    )
    assert result.rate_windows == 1
    left = await db.fetch("SELECT queue_id FROM queue_rate_windows")
    assert [r["queue_id"] for r in left] == [fresh]
