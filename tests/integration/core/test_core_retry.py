"""Retries follow the queue's backoff policy; out of attempts lands in the DLQ; replay runs again."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from tests.factories import make_queue, make_retry_policy, make_tenant, project_of
from tests.integration.core.helpers import executions, job_row

from codity.core import Failure, NewJob, claim, enqueue, fail, promote_due, replay_dead_letters
from codity.domain.backoff import ceiling_ms

LEASE_MS = 30_000
SLACK_MS = 2_000  # time between our clock read and the statement's now(), on a loaded box


class _Top:
    """Jitter source pinned to the top of the range, to check the un-jittered ceiling exactly."""

    def uniform(self, a: float, b: float) -> float:
        return b


async def _fail_once(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker: uuid.UUID, job_id: int, **kw: Any
) -> float:
    """Claim the (due) job, fail it; returns the retry delay the database recorded, in ms."""
    await db.execute(
        "UPDATE jobs SET run_at = now() WHERE id = $1 AND status = 'scheduled'", job_id
    )
    await promote_due(db)
    (j,) = await claim(db, worker, [queue_id], 1, LEASE_MS)
    assert j.id == job_id
    before = await db.fetchval("SELECT now()")
    await fail(db, [Failure(j.fence, f"attempt {j.attempt} failed")], **kw)
    row = await job_row(db, job_id)
    return (row["run_at"] - before).total_seconds() * 1000


async def test_job_failing_every_attempt_follows_queue_backoff_then_dead_letters(
    db: asyncpg.Connection[Any], worker_id: uuid.UUID
) -> None:
    tenant = await make_tenant(db)
    policy = await make_retry_policy(
        db,
        tenant.project_id,
        strategy="exponential",
        base_delay_ms=1_000,
        max_delay_ms=5_000,
        max_attempts=5,
        jitter=True,
    )
    queue_id = await make_queue(db, tenant.project_id, retry_policy_id=policy)
    job = await enqueue(db, queue_id, NewJob("flaky", {"order": 7}))
    delays = []
    for attempt in range(1, 5):
        delay = await _fail_once(db, queue_id, worker_id, job.id)
        top = ceiling_ms("exponential", attempt, 1_000, 5_000)  # 1 s, 2 s, 4 s, 5 s (clamped)
        assert -SLACK_MS <= delay <= top + SLACK_MS, (attempt, delay, top)
        assert (await job_row(db, job.id))["status"] in ("scheduled", "queued")
        delays.append(delay)
    # the fifth failure has no attempt left: dead letter, with its payload and reason
    await _fail_once(db, queue_id, worker_id, job.id)
    row = await job_row(db, job.id)
    assert row["status"] == "dead_letter"
    assert row["attempt"] == 5
    dl = await db.fetchrow("SELECT * FROM dead_letter_jobs WHERE job_id = $1", job.id)
    assert dl["payload"] == {"order": 7}
    assert dl["error"] == "attempt 5 failed"
    assert dl["attempts"] == 5
    assert [e["status"] for e in await executions(db, job.id)] == ["failed"] * 5

    # replay: runs again, attempt budget fresh, a new execution identity
    assert await replay_dead_letters(db, await project_of(db, queue_id), [dl["id"]]) == [job.id]
    (again,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    assert again.id == job.id
    assert again.attempt == 1
    assert again.execution_seq == 6


async def test_backoff_ceiling_is_used_exactly_without_jitter(
    db: asyncpg.Connection[Any], worker_id: uuid.UUID
) -> None:
    tenant = await make_tenant(db)
    policy = await make_retry_policy(
        db,
        tenant.project_id,
        strategy="linear",
        base_delay_ms=10_000,
        max_delay_ms=25_000,
        max_attempts=4,
        jitter=False,
    )
    queue_id = await make_queue(db, tenant.project_id, retry_policy_id=policy)
    job = await enqueue(db, queue_id, NewJob("h"))
    got = [await _fail_once(db, queue_id, worker_id, job.id) for _ in range(3)]
    for measured, expected in zip(got, (10_000, 20_000, 25_000), strict=True):
        assert abs(measured - expected) < SLACK_MS


async def test_job_policy_overrides_queue_policy_and_default_is_exponential(
    db: asyncpg.Connection[Any], worker_id: uuid.UUID
) -> None:
    tenant = await make_tenant(db)
    own = await make_retry_policy(
        db,
        tenant.project_id,
        strategy="fixed",
        base_delay_ms=7_000,
        max_delay_ms=7_000,
        max_attempts=3,
        jitter=False,
    )
    queue_id = await make_queue(db, tenant.project_id)  # no queue policy
    with_policy = await enqueue(db, queue_id, NewJob("h", retry_policy_id=own))
    assert abs(await _fail_once(db, queue_id, worker_id, with_policy.id) - 7_000) < SLACK_MS
    default = await enqueue(db, queue_id, NewJob("h"))
    # default policy: exponential from 1 s, full jitter; pinned to the top of the range -> 1 s
    assert abs(await _fail_once(db, queue_id, worker_id, default.id, rng=_Top()) - 1_000) < SLACK_MS
