"""Enqueue: defaults from the queue, idempotency, delays, bulk, notify, and bad input."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue, make_retry_policy, make_tenant

from codity.core import (
    NOTIFY_CHANNEL,
    NewJob,
    enqueue,
    enqueue_many,
    resolve_queue,
)
from codity.db.tables import MAX_PAYLOAD_BYTES
from codity.domain.errors import PayloadTooLargeError, QueueNotFoundError, ValidationError
from codity.domain.states import JobStatus


async def _count(db: asyncpg.Connection[Any]) -> int:
    return await db.fetchval("SELECT count(*) FROM jobs")


async def test_enqueue_takes_queue_defaults(db: asyncpg.Connection[Any]) -> None:
    tenant = await make_tenant(db)
    policy = await make_retry_policy(db, tenant.project_id, max_attempts=7)
    q = await make_queue(db, tenant.project_id, retry_policy_id=policy, default_timeout_ms=1234)
    job = await enqueue(db, q, NewJob("email.send", {"to": "a@b.c"}))
    assert job.created
    assert job.status is JobStatus.QUEUED
    row = await db.fetchrow("SELECT * FROM jobs WHERE id = $1", job.id)
    assert row["max_attempts"] == 7  # from the queue's retry policy
    assert row["timeout_ms"] == 1234
    assert row["payload"] == {"to": "a@b.c"}
    assert row["attempt"] == 0
    assert row["execution_seq"] == 0


async def test_explicit_settings_win(db: asyncpg.Connection[Any], queue_id: uuid.UUID) -> None:
    batch = uuid.uuid4()
    job = await enqueue(
        db, queue_id, NewJob("h", priority=5, max_attempts=2, timeout_ms=50, batch_id=batch)
    )
    row = await db.fetchrow("SELECT * FROM jobs WHERE id = $1", job.id)
    assert (row["priority"], row["max_attempts"], row["timeout_ms"], row["batch_id"]) == (
        5,
        2,
        50,
        batch,
    )


async def test_delay_and_run_at_schedule(db: asyncpg.Connection[Any], queue_id: uuid.UUID) -> None:
    later = await enqueue(db, queue_id, NewJob("h", delay_s=60))
    at = await enqueue(db, queue_id, NewJob("h", run_at=datetime.now(UTC) + timedelta(hours=1)))
    past = await enqueue(db, queue_id, NewJob("h", run_at=datetime.now(UTC) - timedelta(hours=1)))
    assert later.status is JobStatus.SCHEDULED
    assert at.status is JobStatus.SCHEDULED
    assert past.status is JobStatus.QUEUED
    delay = await db.fetchval(
        "SELECT extract(epoch FROM run_at - now()) FROM jobs WHERE id = $1", later.id
    )
    assert 55 < delay <= 60


async def test_idempotency_key_returns_existing(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    first = await enqueue(db, queue_id, NewJob("h", {"n": 1}, idempotency_key="k1"))
    again = await enqueue(db, queue_id, NewJob("h", {"n": 2}, idempotency_key="k1"))
    assert first.created
    assert not again.created
    assert again.id == first.id
    assert await _count(db) == 1
    # per queue: the same key in another queue is another job
    other = await make_queue(db)
    assert (await enqueue(db, other, NewJob("h", idempotency_key="k1"))).created


async def test_enqueue_many_one_statement_in_order(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    await enqueue(db, queue_id, NewJob("h", idempotency_key="dup"))
    jobs = [NewJob("h", {"i": i}) for i in range(500)]
    jobs.insert(10, NewJob("h", idempotency_key="dup"))
    jobs.insert(20, NewJob("h", idempotency_key="fresh"))
    jobs.insert(30, NewJob("h", idempotency_key="fresh"))
    out = await enqueue_many(db, queue_id, jobs)
    assert len(out) == len(jobs)
    assert [o.created for o in out].count(False) == 2
    assert out[20].created
    assert not out[30].created
    assert out[30].id == out[20].id
    payloads = await db.fetch(
        "SELECT id, payload FROM jobs WHERE id = ANY($1::bigint[])", [o.id for o in out]
    )
    by_id = {r["id"]: r["payload"] for r in payloads}
    for job, made in zip(jobs, out, strict=True):
        if job.idempotency_key is None:
            assert by_id[made.id] == job.payload
    assert await _count(db) == 502


async def test_transactional_enqueue_rolls_back_with_caller(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    tx = db.transaction()
    await tx.start()
    await enqueue(db, queue_id, NewJob("h"))
    assert await _count(db) == 1  # visible inside the caller's transaction
    await tx.rollback()
    assert await _count(db) == 0
    async with db.transaction():
        await enqueue(db, queue_id, NewJob("h"))
    assert await _count(db) == 1


async def test_notify_on_enqueue_delivered_at_commit(
    db: asyncpg.Connection[Any], database_url: str, queue_id: uuid.UUID
) -> None:
    from codity.db.pool import connect

    listener = await connect(database_url)
    got: list[str] = []
    await listener.add_listener(NOTIFY_CHANNEL, lambda *args: got.append(args[3]))
    try:
        async with db.transaction():
            await enqueue_many(db, queue_id, [NewJob("h") for _ in range(5)])
            await enqueue(db, queue_id, NewJob("h"))
            await asyncio.sleep(0.2)
            assert got == []  # not before commit
        for _ in range(50):
            if got:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        assert got == [str(queue_id)]  # debounced: one per queue per transaction
        got.clear()
        await enqueue(db, queue_id, NewJob("h", delay_s=3600))
        await asyncio.sleep(0.2)
        assert got == []  # nothing claimable, nobody woken
    finally:
        await listener.close()


async def test_resolve_queue_by_name_or_id_within_project(db: asyncpg.Connection[Any]) -> None:
    a, b = await make_tenant(db), await make_tenant(db)
    qa = await make_queue(db, a.project_id, name="emails")
    assert (await resolve_queue(db, a.project_id, "emails")).id == qa
    assert (await resolve_queue(db, a.project_id, qa)).name == "emails"
    assert (await resolve_queue(db, a.project_id, str(qa))).id == qa
    with pytest.raises(QueueNotFoundError):
        await resolve_queue(db, b.project_id, qa)  # another tenant's queue does not exist
    with pytest.raises(QueueNotFoundError):
        await resolve_queue(db, a.project_id, "nope")


BAD_INPUT: list[tuple[NewJob, type[Exception], str]] = [
    (NewJob("h", {"x": "a" * MAX_PAYLOAD_BYTES}), PayloadTooLargeError, "limit is 65536"),
    (NewJob("h", {"x": object()}), ValidationError, "not JSON-serialisable"),
    (NewJob("h", {"x": float("nan")}), ValidationError, "not JSON-serialisable"),
    (NewJob("h", delay_s=-1), ValidationError, "must not be negative"),
    (NewJob(""), ValidationError, "handler"),
    (NewJob("h", priority=40_000), ValidationError, "priority"),
    (NewJob("h", max_attempts=0), ValidationError, "max_attempts"),
    (NewJob("h", max_attempts=101), ValidationError, "max_attempts"),
    (NewJob("h", timeout_ms=-5), ValidationError, "timeout_ms"),
    (NewJob("h", run_at=datetime(2030, 1, 1)), ValidationError, "timezone-aware"),
    (NewJob("h", depends_on=[999_999]), ValidationError, "unknown job ids"),
    (NewJob("h", retry_policy_id=uuid.uuid4()), ValidationError, "unknown retry policy"),
]


async def test_bad_input_raises_typed_error_and_writes_nothing(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    for job, error, fragment in BAD_INPUT:  # one database for all cases: clones cost time
        with pytest.raises(error, match=fragment):
            await enqueue(db, queue_id, job)
        # a bad job in a batch rejects the whole batch
        with pytest.raises(error):
            await enqueue_many(db, queue_id, [NewJob("ok"), job])
        assert await _count(db) == 0, job


async def test_unknown_queue(db: asyncpg.Connection[Any]) -> None:
    with pytest.raises(QueueNotFoundError):
        await enqueue(db, uuid.uuid4(), NewJob("h"))
    assert await _count(db) == 0


async def test_another_tenants_jobs_and_policies_are_unknown(db: asyncpg.Connection[Any]) -> None:
    mine, theirs = await make_tenant(db), await make_tenant(db)
    my_queue = await make_queue(db, mine.project_id)
    their_queue = await make_queue(db, theirs.project_id)
    their_job = await enqueue(db, their_queue, NewJob("h"))
    their_policy = await make_retry_policy(db, theirs.project_id)
    with pytest.raises(ValidationError, match="unknown job ids"):
        await enqueue(db, my_queue, NewJob("h", depends_on=[their_job.id]))
    with pytest.raises(ValidationError, match="unknown retry policy"):
        await enqueue(db, my_queue, NewJob("h", retry_policy_id=their_policy))
    assert await _count(db) == 1


#: Columns a job is written with (everything but its id and the clocks of its own insert).
_WRITTEN = (
    "handler, payload, status::text AS status, priority, max_attempts, retry_policy_id, "
    "timeout_ms, idempotency_key, batch_id, pending_dependencies, trace_parent, "
    "concurrency_key, unique_key, run_at > created_at AS delayed"
)


@pytest.mark.parametrize(
    "job",
    [
        NewJob("a"),
        NewJob("b", {"k": [1, 2]}, priority=5, delay_s=60, timeout_ms=99, max_attempts=4),
        NewJob("c", idempotency_key="same", concurrency_key="tenant-1"),
    ],
    ids=["defaults", "options", "keys"],
)
async def test_one_job_is_written_as_a_bulk_enqueue_writes_it(
    db: asyncpg.Connection[Any], job: NewJob
) -> None:
    """One job goes through `insert_job`, several through `insert_jobs` (enqueue.sql): two
    statements, one meaning. The same job written both ways has the same columns, defaults
    from the queue and its retry policy included."""
    tenant = await make_tenant(db)
    policy = await make_retry_policy(db, tenant.project_id, max_attempts=7)
    one = await make_queue(db, tenant.project_id, retry_policy_id=policy, default_timeout_ms=5)
    many = await make_queue(db, tenant.project_id, retry_policy_id=policy, default_timeout_ms=5)
    single = await enqueue(db, one, job)
    bulk = await enqueue_many(db, many, [job, NewJob("other")])
    assert single.created
    assert bulk[0].created
    assert single.status is bulk[0].status
    written = [
        dict(await db.fetchrow(f"SELECT {_WRITTEN} FROM jobs WHERE id = $1", made.id))
        for made in (single, bulk[0])
    ]
    assert written[0] == written[1]
    if job.idempotency_key is not None:  # a repeat of one job finds it, as a bulk repeat does
        again = await enqueue(db, one, job)
        assert (again.id, again.created) == (single.id, False)
