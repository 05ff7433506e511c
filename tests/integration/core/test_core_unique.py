"""Unique jobs: an enqueue with unique_for_s returns a recent matching job instead of a new one.

The race test is the guarantee: 20 enqueuers, each in its own transaction that stays open a
moment after the enqueue (an application enqueuing inside its own transaction), all enqueue the
same unique job at once. Exactly one job is made and every enqueuer gets it. Its twin runs the
same race with the key lock replaced by a statement that locks nothing, and sees duplicates.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue

from codity.core import NewJob, enqueue, enqueue_many
from codity.core import drivers as core_drivers
from codity.db.pool import connect
from codity.domain.errors import ValidationError
from codity.domain.flow import default_unique_key
from codity.domain.states import JobStatus

ENQUEUERS = 20
#: How long each racing enqueuer keeps its transaction open after enqueuing: long enough that
#: without the lock every one of them looks up the key before any of them commits.
HOLD_S = 0.1


async def _jobs(db: asyncpg.Connection[Any], queue_id: uuid.UUID) -> int:
    return await db.fetchval("SELECT count(*) FROM jobs WHERE queue_id = $1", queue_id)


async def test_a_unique_enqueue_returns_the_unfinished_match(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    first = await enqueue(db, queue_id, NewJob("report", {"a": 1, "b": 2}, unique_for_s=60))
    # Same handler and payload (key order does not matter): the same job.
    again = await enqueue(db, queue_id, NewJob("report", {"b": 2, "a": 1}, unique_for_s=60))
    other_payload = await enqueue(db, queue_id, NewJob("report", {"a": 2}, unique_for_s=60))
    other_handler = await enqueue(db, queue_id, NewJob("other", {"a": 1, "b": 2}, unique_for_s=60))
    plain = await enqueue(db, queue_id, NewJob("report", {"a": 1, "b": 2}))

    assert first.created
    assert first.status is JobStatus.QUEUED
    assert (again.id, again.created) == (first.id, False)
    assert other_payload.created
    assert other_payload.id != first.id
    assert other_handler.created
    assert other_handler.id != first.id
    assert plain.created
    assert plain.id != first.id
    row = await db.fetchrow("SELECT unique_key FROM jobs WHERE id = $1", first.id)
    assert row["unique_key"] == default_unique_key("report", {"a": 1, "b": 2})
    assert await db.fetchval("SELECT unique_key FROM jobs WHERE id = $1", plain.id) is None


async def test_a_named_unique_key_ignores_the_payload(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    first = await enqueue(
        db, queue_id, NewJob("sync", {"page": 1}, unique_for_s=60, unique_key="user-7")
    )
    again = await enqueue(
        db, queue_id, NewJob("sync", {"page": 2}, unique_for_s=60, unique_key="user-7")
    )
    assert (again.id, again.created) == (first.id, False)


async def test_finished_jobs_match_only_when_their_state_is_asked_for(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    job = NewJob("h", {"x": 1}, unique_for_s=60)
    first = await enqueue(db, queue_id, job)
    await db.execute(
        "UPDATE jobs SET status = 'cancelled', finished_at = now() WHERE id = $1", first.id
    )
    # Default states are the unfinished ones: a cancelled job does not match.
    second = await enqueue(db, queue_id, job)
    assert second.created
    assert second.id != first.id
    await db.execute(
        "UPDATE jobs SET status = 'cancelled', finished_at = now() WHERE id = $1", second.id
    )
    # Asking for finished states too: the newest cancelled one is returned.
    third = await enqueue(
        db,
        queue_id,
        NewJob("h", {"x": 1}, unique_for_s=60, unique_states=["queued", "cancelled"]),
    )
    assert (third.id, third.created, third.status) == (second.id, False, JobStatus.CANCELLED)


async def test_a_match_older_than_the_window_does_not_count(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    first = await enqueue(db, queue_id, NewJob("h", unique_for_s=30))
    await db.execute(
        "UPDATE jobs SET created_at = now() - interval '31 seconds' WHERE id = $1", first.id
    )
    second = await enqueue(db, queue_id, NewJob("h", unique_for_s=30))
    assert second.created
    assert second.id != first.id
    # A longer window still reaches the first one... but the newest match wins.
    third = await enqueue(db, queue_id, NewJob("h", unique_for_s=60))
    assert (third.id, third.created) == (second.id, False)


async def test_uniqueness_is_per_queue(db: asyncpg.Connection[Any], queue_id: uuid.UUID) -> None:
    project = await db.fetchval("SELECT project_id FROM queues WHERE id = $1", queue_id)
    other = await make_queue(db, project, name="other")
    a = await enqueue(db, queue_id, NewJob("h", unique_for_s=60))
    b = await enqueue(db, other, NewJob("h", unique_for_s=60))
    assert a.created
    assert b.created
    assert a.id != b.id


async def test_repeats_within_one_bulk_call_get_the_calls_first_job(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    existing = await enqueue(db, queue_id, NewJob("h", {"n": 0}, unique_for_s=60))
    jobs = [
        NewJob("h", {"n": 1}, unique_for_s=60),
        NewJob("h", {"n": 0}, unique_for_s=60),  # matches the stored job
        NewJob("h", {"n": 1}, unique_for_s=60),  # repeats this call's first row
        NewJob("h", {"n": 1}),  # plain: always new
        NewJob("h", {"n": 2}, unique_for_s=60, concurrency_key="k"),
    ]
    result = await enqueue_many(db, queue_id, jobs)
    assert [r.created for r in result] == [True, False, False, True, True]
    assert result[1].id == existing.id
    assert result[2].id == result[0].id
    assert len({r.id for r in result}) == 4
    assert await _jobs(db, queue_id) == 4  # existing + 3 new
    assert await db.fetchval("SELECT concurrency_key FROM jobs WHERE id = $1", result[4].id) == "k"


async def test_unique_and_idempotency_keys_together(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    first = await enqueue(db, queue_id, NewJob("h", unique_for_s=60, idempotency_key="i-1"))
    await db.execute(
        "UPDATE jobs SET status = 'cancelled', finished_at = now() WHERE id = $1", first.id
    )
    # No unique match (cancelled), but the idempotency key is forever: the same job.
    again = await enqueue(db, queue_id, NewJob("h", unique_for_s=60, idempotency_key="i-1"))
    assert (again.id, again.created) == (first.id, False)


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (NewJob("h", unique_key="k"), "need unique_for_s"),
        (NewJob("h", unique_states=["queued"]), "need unique_for_s"),
        (NewJob("h", unique_for_s=0), "unique_for_s"),
        (NewJob("h", unique_for_s=float("nan")), "unique_for_s"),
        (NewJob("h", unique_for_s=True), "unique_for_s"),
        (NewJob("h", unique_for_s=10, unique_states=[]), "unique_states"),
        (NewJob("h", unique_for_s=10, unique_states="queued"), "unique_states"),
        (NewJob("h", unique_for_s=10, unique_states=["queued", "done"]), "'done'"),
        (NewJob("h", unique_for_s=10, unique_key=""), "unique_key"),
        (NewJob("h", concurrency_key=""), "concurrency_key"),
        (NewJob("h", concurrency_key="k" * 256), "concurrency_key"),
    ],
)
async def test_bad_flow_fields_are_refused_before_anything_is_written(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, job: NewJob, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        await enqueue_many(db, queue_id, [NewJob("fine"), job])
    assert await _jobs(db, queue_id) == 0


async def test_a_unique_enqueue_refuses_a_repeatable_read_transaction(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    async with db.transaction(isolation="repeatable_read"):
        with pytest.raises(ValidationError, match="READ COMMITTED"):
            await enqueue(db, queue_id, NewJob("h", unique_for_s=60))
    assert await _jobs(db, queue_id) == 0


async def _race(database_url: str, queue_id: uuid.UUID) -> list[int]:
    """ENQUEUERS connections enqueue the same unique job at once, each inside a transaction
    held open HOLD_S after its enqueue. Returns the job id each one was given."""
    conns = [await connect(database_url) for _ in range(ENQUEUERS)]
    start = asyncio.Event()

    async def one(conn: asyncpg.Connection[Any]) -> int:
        await start.wait()
        async with conn.transaction():
            job = await enqueue(conn, queue_id, NewJob("charge", {"order": 42}, unique_for_s=60))
            await asyncio.sleep(HOLD_S)
        return job.id

    try:
        tasks = [asyncio.create_task(one(c)) for c in conns]
        await asyncio.sleep(0.05)
        start.set()
        return await asyncio.gather(*tasks)
    finally:
        for c in conns:
            await c.close()


async def test_20_concurrent_unique_enqueues_make_one_job(
    db: asyncpg.Connection[Any], database_url: str, queue_id: uuid.UUID
) -> None:
    ids = await _race(database_url, queue_id)
    assert len(ids) == ENQUEUERS
    assert len(set(ids)) == 1
    assert await _jobs(db, queue_id) == 1


def _without_the_key_lock(real: Callable[..., str]) -> Callable[..., str]:
    def spliced(name: str, *fragments: str) -> str:
        if name == "lock_unique_keys":
            # Same parameters and reply, no lock.
            return (
                "SELECT cardinality($2::text[]) AS locked, $1::uuid AS queue, "
                "current_setting('transaction_isolation') AS isolation"
            )
        return real(name, *fragments)

    return spliced


async def test_break_it_without_the_key_lock_concurrent_enqueues_make_duplicates(
    db: asyncpg.Connection[Any],
    database_url: str,
    queue_id: uuid.UUID,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same race with the lock statement replaced by one that locks nothing: every
    enqueuer looks the key up before any of them commits, and each makes its own job."""
    monkeypatch.setattr(core_drivers, "spliced", _without_the_key_lock(core_drivers.spliced))
    ids = await _race(database_url, queue_id)
    assert len(set(ids)) > 1
    assert await _jobs(db, queue_id) > 1
