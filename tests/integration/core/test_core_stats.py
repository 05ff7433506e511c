"""The chart rollups: closed minutes of history folded into queue/handler/worker rows."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from tests.factories import make_finished_attempt, make_queue, make_rollup_state, make_worker

from codity import core
from codity.core.stats import MAX_CATCH_UP, SETTLE, floor_minute
from codity.domain import histogram

T0 = datetime(2026, 3, 1, 9, 44, tzinfo=UTC)  # a quarter and an hour close at 10:00


async def _start_at(db: asyncpg.Connection[Any], minute: datetime) -> None:
    await make_rollup_state(db, minute)


async def test_a_closed_minute_becomes_counts_and_percentiles(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    await _start_at(db, T0)
    # Ten attempts in 09:44: wait 20 ms, run 100 ms for nine; one slow failure (run 5 s).
    for i in range(9):
        start = T0 + timedelta(seconds=i)
        await make_finished_attempt(
            db, queue_id, handler="fast", run_at=start - timedelta(milliseconds=20),
            started_at=start, finished_at=start + timedelta(milliseconds=100), worker_id=worker_id,
        )  # fmt: skip
    start = T0 + timedelta(seconds=30)
    await make_finished_attempt(
        db, queue_id, handler="slow", run_at=start, started_at=start,
        finished_at=start + timedelta(seconds=5), status="failed", worker_id=worker_id,
        error="boom",
    )  # fmt: skip
    # An attempt in the next minute must not count in this one.
    later = T0 + timedelta(minutes=1, seconds=1)
    await make_finished_attempt(db, queue_id, run_at=later, started_at=later, finished_at=later)

    result = await core.rollup_stats(db, T0 + timedelta(minutes=1) + SETTLE)
    assert result.minute == T0
    row = await db.fetchrow(
        "SELECT * FROM queue_stats WHERE queue_id = $1 AND grain = 1 AND bucket = $2", queue_id, T0
    )
    assert (row["completed"], row["failed"]) == (9, 1)
    wait_p50 = histogram.percentile(row["wait_hist"], 0.5)
    assert wait_p50 is not None
    assert 20 / 1.5 <= wait_p50 <= 20 * 1.5
    assert row["depth"] is not None  # the last closed minute is sampled
    runs = {
        r["handler"]: r
        for r in await db.fetch("SELECT * FROM handler_stats WHERE grain = 1 AND bucket = $1", T0)
    }
    assert set(runs) == {"fast", "slow"}
    assert 100 / 1.5 <= histogram.percentile(runs["fast"]["run_hist"], 0.95) <= 100 * 1.5
    assert 5000 / 1.5 <= histogram.percentile(runs["slow"]["run_hist"], 0.5) <= 5000 * 1.5
    per_worker = await db.fetchrow(
        "SELECT completed, failed FROM worker_stats WHERE worker_id = $1 AND bucket = $2",
        worker_id,
        T0,
    )
    assert (per_worker["completed"], per_worker["failed"]) == (9, 1)
    # Not yet settled: the next minute is left alone.
    again = await core.rollup_stats(db, T0 + timedelta(minutes=2))
    assert again.minute is None


async def test_quarters_and_hours_sum_their_minutes(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    await _start_at(db, T0)
    for m in range(16):  # 09:44 .. 09:59, one completion each
        at = T0 + timedelta(minutes=m, seconds=10)
        await make_finished_attempt(db, queue_id, run_at=at, started_at=at, finished_at=at)
    now = T0 + timedelta(minutes=16) + SETTLE
    done = []
    while (result := await core.rollup_stats(db, now)).minute is not None:
        done.append(result.minute)
    assert done == [T0 + timedelta(minutes=m) for m in range(16)]
    rows = {
        (r["grain"], r["bucket"]): r["completed"]
        for r in await db.fetch(
            "SELECT * FROM queue_stats WHERE grain > 1 AND queue_id = $1", queue_id
        )
    }
    at = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    # 09:44 closes the 09:30 quarter (one minute of it rolled up), 09:59 the 09:45 quarter
    # and the 09:00 hour.
    assert rows == {
        (15, at): 1,
        (15, at + timedelta(minutes=15)): 15,
        (60, at - timedelta(minutes=30)): 16,
    }


async def test_replicas_never_roll_the_same_minute_twice(
    database_url: str, db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    """The watermark row is locked with SKIP LOCKED: two schedulers at once do one minute."""
    await _start_at(db, T0)
    at = T0 + timedelta(seconds=1)
    await make_finished_attempt(db, queue_id, run_at=at, started_at=at, finished_at=at)
    now = T0 + timedelta(minutes=1) + SETTLE
    pool = await asyncpg.create_pool(database_url, min_size=4, max_size=4)
    try:
        results = await asyncio.gather(*(core.rollup_stats(pool, now) for _ in range(4)))
    finally:
        await pool.close()
    assert [r.minute for r in results].count(T0) == 1
    assert await db.fetchval("SELECT done_until FROM stats_rollup_state") == T0 + timedelta(
        minutes=1
    )


async def test_first_run_back_fills_the_catch_up_window(db: asyncpg.Connection[Any]) -> None:
    now = datetime.now(UTC)
    assert (await core.rollup_stats(db, now)).minute is None
    assert await db.fetchval("SELECT done_until FROM stats_rollup_state") == floor_minute(
        now - MAX_CATCH_UP
    )
    assert (await core.rollup_stats(db, now)).more


async def test_a_deleted_queue_takes_its_rows_with_it(db: asyncpg.Connection[Any]) -> None:
    queue = await make_queue(db)
    worker = await make_worker(db)
    await _start_at(db, T0)
    at = T0 + timedelta(seconds=1)
    await make_finished_attempt(
        db, queue, run_at=at, started_at=at, finished_at=at, worker_id=worker
    )
    await core.rollup_stats(db, T0 + timedelta(minutes=1) + SETTLE)
    assert await db.fetchval("SELECT count(*) FROM queue_stats WHERE queue_id = $1", queue) >= 1
    await db.execute("DELETE FROM queues WHERE id = $1", queue)
    for table in ("queue_stats", "handler_stats", "worker_stats"):
        assert await db.fetchval(f"SELECT count(*) FROM {table} WHERE queue_id = $1", queue) == 0
