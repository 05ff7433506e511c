"""Cron materialisation: once per occurrence, even with concurrent materialisers; missed runs fire once."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from tests.factories import make_schedule

from codity.core import materialise_cron, occurrence_key


async def _schedule(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, cron: str, next_run_at: datetime
) -> uuid.UUID:
    return await make_schedule(
        db, queue_id, cron=cron, handler="tick", payload={"from": "cron"}, next_run_at=next_run_at
    )


async def test_due_schedule_enqueues_one_job_and_advances_from_now(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    now = await db.fetchval("SELECT now()")
    fire = now - timedelta(seconds=5)
    sid = await _schedule(db, queue_id, "* * * * *", fire)
    (job_id,) = await materialise_cron(db)
    job = await db.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id)
    assert job["idempotency_key"] == occurrence_key(sid, fire)
    assert (job["handler"], job["payload"], job["schedule_id"], job["status"]) == (
        "tick",
        {"from": "cron"},
        sid,
        "queued",
    )
    s = await db.fetchrow("SELECT * FROM scheduled_jobs WHERE id = $1", sid)
    assert s["last_job_id"] == job_id
    assert now < s["next_run_at"] <= now + timedelta(minutes=1)
    assert await materialise_cron(db) == []  # not due again until the next minute


async def test_an_hour_of_missed_minutes_fires_once(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    now = await db.fetchval("SELECT now()")
    sid = await _schedule(db, queue_id, "* * * * *", now - timedelta(hours=1))
    fired = []
    for _ in range(5):  # five scheduler ticks after an hour of downtime
        fired += await materialise_cron(db)
    assert len(fired) == 1
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE schedule_id = $1", sid) == 1
    next_run = await db.fetchval("SELECT next_run_at FROM scheduled_jobs WHERE id = $1", sid)
    assert next_run > now  # computed from now, not from the stale next_run_at


async def test_two_concurrent_materialisers_enqueue_exactly_one_job_per_occurrence(
    pool: asyncpg.Pool[Any], queue_id: uuid.UUID
) -> None:
    """Two replicas materialise at the same time: A has claimed its share of the due schedules
    and its transaction is still open when B runs. The overlap is arranged, not hoped for (two
    free-running tasks on a loaded machine often run one after the other and prove nothing).
    B must neither wait for A's schedules nor fire them: it takes the rest, at once."""
    now = await pool.fetchval("SELECT now()")
    sids = [
        await _schedule(pool, queue_id, "* * * * *", now - timedelta(seconds=1)) for _ in range(20)
    ]
    async with pool.acquire() as conn_a, pool.acquire() as conn_b:
        tx_a = conn_a.transaction()
        await tx_a.start()
        a = await materialise_cron(conn_a, limit=8)  # A's share, locked until A commits
        assert len(a) == 8
        # B runs while A's transaction holds its schedules and its not-yet-committed jobs.
        b_task = asyncio.create_task(materialise_cron(conn_b, limit=100))
        done, _ = await asyncio.wait({b_task}, timeout=15)
        assert done, (
            f"B did not finish while A held its schedules (blocked by "
            f"{await pool.fetchval('SELECT pg_blocking_pids($1)', conn_b.get_server_pid())})"
        )
        b = b_task.result()
        # The two overlapped: A was still inside its transaction when B finished.
        assert conn_a.is_in_transaction()
        assert await pool.fetchval(
            "SELECT state FROM pg_stat_activity WHERE pid = $1", conn_a.get_server_pid()
        ) in ("idle in transaction", "active")
        await tx_a.commit()
    assert len(a) + len(b) == 20
    assert not set(a) & set(b)
    counts = await pool.fetch("SELECT schedule_id, count(*) AS n FROM jobs GROUP BY schedule_id")
    assert {r["schedule_id"]: r["n"] for r in counts} == dict.fromkeys(sids, 1)


async def test_idempotency_key_alone_stops_a_double_fire(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    """Break-it: even if two materialisers both saw the same due row (no SKIP LOCKED), the
    occurrence key makes the second enqueue return the first job."""
    now = await db.fetchval("SELECT now()")
    fire = now - timedelta(seconds=1)
    sid = await _schedule(db, queue_id, "* * * * *", fire)
    (first,) = await materialise_cron(db)
    await db.execute("UPDATE scheduled_jobs SET next_run_at = $2 WHERE id = $1", sid, fire)
    (second,) = await materialise_cron(db)  # the same occurrence again
    assert second == first
    assert await db.fetchval("SELECT count(*) FROM jobs") == 1


async def test_invalid_stored_expression_disables_schedule(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    sid = await _schedule(db, queue_id, "not a cron", datetime.now(UTC) - timedelta(minutes=1))
    assert await materialise_cron(db) == []
    assert await db.fetchval("SELECT enabled FROM scheduled_jobs WHERE id = $1", sid) is False
