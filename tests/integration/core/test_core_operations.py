"""Cancel, retry, DLQ replay/discard, dependencies, worker registry, the transition trigger."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import asyncpg
import pytest
from tests.factories import make_project, make_queue, project_of
from tests.integration.core.helpers import executions, expire_leases, job_row
from tests.waiting import wait_until_blocked

from codity.core import (
    Completion,
    Failure,
    NewJob,
    cancel_job,
    claim,
    complete,
    discard_dead_letters,
    enqueue,
    fail,
    heartbeat,
    pause_queue,
    reap_expired,
    register_worker,
    replay_dead_letters,
    replay_queue_dead_letters,
    resolve_worker_queues,
    resume_queue,
    retry_job,
    set_worker_status,
)
from codity.domain.errors import (
    DeadLetterNotFoundError,
    IllegalTransitionError,
    JobNotFoundError,
    NotFoundError,
    QueueNotFoundError,
)
from codity.domain.states import ALLOWED_TRANSITIONS, JobStatus, WorkerStatus

LEASE_MS = 30_000


async def _dead_letter(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID, payload: Any
) -> int:
    job = await enqueue(db, queue_id, NewJob("h", payload, max_attempts=1))
    (j,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    await fail(db, [Failure(j.fence, "broken")])
    return job.id


async def test_cancel_queued_now_running_by_request(
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
    worker_id: uuid.UUID,
    queue_project_id: uuid.UUID,
) -> None:
    waiting = await enqueue(db, queue_id, NewJob("h", delay_s=60))
    assert await cancel_job(db, queue_project_id, waiting.id) is JobStatus.CANCELLED
    assert await cancel_job(db, queue_project_id, waiting.id) is JobStatus.CANCELLED  # idempotent

    running = await enqueue(db, queue_id, NewJob("h"))
    (j,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    assert (
        await cancel_job(db, queue_project_id, running.id) is JobStatus.CLAIMED
    )  # still leased, cancel requested
    beat = await heartbeat(db, worker_id, LEASE_MS, [j.fence])
    assert beat.cancel_requested == [running.id]
    await fail(db, [Failure(j.fence, "cancelled by operator", kind="cancelled")])
    assert (await job_row(db, running.id))["status"] == "cancelled"
    assert [e["status"] for e in await executions(db, running.id)] == ["cancelled"]

    with pytest.raises(JobNotFoundError):
        await cancel_job(db, queue_project_id, 424242)


async def test_cancel_requested_job_whose_worker_died_is_cancelled_by_reaper(
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
    worker_id: uuid.UUID,
    queue_project_id: uuid.UUID,
) -> None:
    job = await enqueue(db, queue_id, NewJob("h"))
    await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    await cancel_job(db, queue_project_id, job.id)
    await expire_leases(db, job.id)
    await reap_expired(db)
    assert (await job_row(db, job.id))["status"] == "cancelled"


async def test_cancel_completed_is_illegal(
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
    worker_id: uuid.UUID,
    queue_project_id: uuid.UUID,
) -> None:
    job = await enqueue(db, queue_id, NewJob("h"))
    (j,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    await complete(db, [Completion(j.fence)])
    with pytest.raises(IllegalTransitionError):
        await cancel_job(db, queue_project_id, job.id)
    with pytest.raises(IllegalTransitionError):
        await retry_job(db, queue_project_id, job.id)


async def test_retry_dead_letter_resets_attempts(
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
    worker_id: uuid.UUID,
    queue_project_id: uuid.UUID,
) -> None:
    job_id = await _dead_letter(db, queue_id, worker_id, {"a": 1})
    assert await retry_job(db, queue_project_id, job_id) is JobStatus.QUEUED
    row = await job_row(db, job_id)
    assert (row["status"], row["attempt"]) == ("queued", 0)
    assert await db.fetchval("SELECT replay_count FROM dead_letter_jobs") == 1


async def test_replay_runs_again_with_new_execution_seq(
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
    worker_id: uuid.UUID,
    queue_project_id: uuid.UUID,
) -> None:
    job_id = await _dead_letter(db, queue_id, worker_id, {"a": 1})
    dl_id = await db.fetchval("SELECT id FROM dead_letter_jobs WHERE job_id = $1", job_id)
    assert await replay_dead_letters(db, queue_project_id, [dl_id]) == [job_id]
    (j,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    assert (j.id, j.attempt, j.execution_seq, j.payload) == (job_id, 1, 2, {"a": 1})
    dl = await db.fetchrow("SELECT * FROM dead_letter_jobs WHERE id = $1", dl_id)
    assert dl["replay_count"] == 1
    assert dl["replayed_at"] is not None
    with pytest.raises(NotFoundError):
        await replay_dead_letters(db, queue_project_id, [uuid.uuid4()])


async def test_replay_of_purged_job_enqueues_a_copy(
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
    worker_id: uuid.UUID,
    queue_project_id: uuid.UUID,
) -> None:
    job_id = await _dead_letter(db, queue_id, worker_id, {"copy": True})
    await db.execute("DELETE FROM jobs WHERE id = $1", job_id)
    dl_id = await db.fetchval("SELECT id FROM dead_letter_jobs")
    (new_id,) = await replay_dead_letters(db, queue_project_id, [dl_id])
    assert new_id != job_id
    row = await job_row(db, new_id)
    assert (row["status"], row["payload"], row["handler"]) == ("queued", {"copy": True}, "h")
    assert await db.fetchval("SELECT job_id FROM dead_letter_jobs") == new_id


async def test_replay_whole_queue_and_discard(
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
    worker_id: uuid.UUID,
    queue_project_id: uuid.UUID,
) -> None:
    ids = [await _dead_letter(db, queue_id, worker_id, {"i": i}) for i in range(3)]
    other = await make_queue(db)
    await _dead_letter(db, other, worker_id, {})
    assert sorted(await replay_queue_dead_letters(db, queue_project_id, queue_id)) == sorted(ids)
    assert (
        await replay_queue_dead_letters(db, queue_project_id, queue_id) == []
    )  # nothing pending any more
    dl_other = await db.fetchval("SELECT id FROM dead_letter_jobs WHERE queue_id = $1", other)
    with pytest.raises(DeadLetterNotFoundError):  # another project's: nothing deleted
        await discard_dead_letters(db, queue_project_id, [dl_other])
    assert await discard_dead_letters(db, await project_of(db, other), [dl_other]) == 1
    assert (
        await db.fetchval("SELECT count(*) FROM dead_letter_jobs WHERE queue_id = $1", other) == 0
    )


async def test_dependencies_wait_then_release(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    a = await enqueue(db, queue_id, NewJob("a"))
    b = await enqueue(db, queue_id, NewJob("b"))
    child = await enqueue(db, queue_id, NewJob("child", depends_on=[a.id, b.id]))
    assert child.status is JobStatus.WAITING
    assert (await job_row(db, child.id))["pending_dependencies"] == 2
    got = await claim(db, worker_id, [queue_id], 10, LEASE_MS)
    assert sorted(g.id for g in got) == [a.id, b.id]  # the waiting child is not claimable
    await complete(db, [Completion(got[0].fence)])
    assert (await job_row(db, child.id))["status"] == "waiting"
    await complete(db, [Completion(got[1].fence)])
    assert (await job_row(db, child.id))["status"] == "queued"
    # depending on an already-completed job does not wait
    done = await enqueue(db, queue_id, NewJob("after", depends_on=[a.id]))
    assert done.status is JobStatus.QUEUED


async def test_dead_lettered_dependency_cancels_dependants_recursively(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    root = await enqueue(db, queue_id, NewJob("root", max_attempts=1))
    child = await enqueue(db, queue_id, NewJob("child", depends_on=[root.id]))
    grandchild = await enqueue(db, queue_id, NewJob("gc", depends_on=[child.id]))
    (j,) = await claim(db, worker_id, [queue_id], 10, LEASE_MS)
    await fail(db, [Failure(j.fence, "x")])
    assert (await job_row(db, child.id))["status"] == "cancelled"
    assert (await job_row(db, grandchild.id))["status"] == "cancelled"


async def test_cancelled_dependency_cancels_dependants(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, queue_project_id: uuid.UUID
) -> None:
    root = await enqueue(db, queue_id, NewJob("root", delay_s=60))
    child = await enqueue(db, queue_id, NewJob("child", depends_on=[root.id]))
    await cancel_job(db, queue_project_id, root.id)
    assert (await job_row(db, child.id))["status"] == "cancelled"


async def test_worker_registry(db: asyncpg.Connection[Any]) -> None:
    q = await make_queue(db, name="emails")
    (info,) = await resolve_worker_queues(db, ["emails"])
    assert info.id == q
    assert q in [i.id for i in await resolve_worker_queues(db, None)]
    with pytest.raises(QueueNotFoundError, match="nope"):
        await resolve_worker_queues(db, ["emails", "nope"])
    wid = await register_worker(
        db, hostname="h1", pid=42, version="1", capacity=5, queue_ids=[q], queue_names=["emails"]
    )
    row = await db.fetchrow("SELECT * FROM workers WHERE id = $1", wid)
    assert (row["status"], row["queue_names"], row["stopped_at"]) == ("active", ["emails"], None)
    assert await db.fetchval("SELECT queue_id FROM worker_queues WHERE worker_id = $1", wid) == q
    await set_worker_status(db, wid, WorkerStatus.DRAINING)
    assert await db.fetchval("SELECT stopped_at FROM workers WHERE id = $1", wid) is None
    await set_worker_status(db, wid, WorkerStatus.STOPPED)
    assert await db.fetchval("SELECT stopped_at FROM workers WHERE id = $1", wid) is not None
    with pytest.raises(NotFoundError):
        await set_worker_status(db, uuid.uuid4(), WorkerStatus.STOPPED)


async def test_database_trigger_matches_allowed_transitions_edge_for_edge(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    """Try every (from, to) pair on a real row: the trigger must allow exactly the map's edges."""
    job_id = (await enqueue(db, queue_id, NewJob("h"))).id
    mismatches = []
    for src, dst in itertools.product(JobStatus, JobStatus):
        if src == dst:
            continue
        tx = db.transaction()
        await tx.start()
        try:
            # Put the row in `src` without the trigger, then try the move with it.
            await db.execute("ALTER TABLE jobs DISABLE TRIGGER jobs_lifecycle")
            await db.execute(
                "UPDATE jobs SET status = $2::job_status, worker_id = $3, "
                "lock_expires_at = now() + interval '1 minute' WHERE id = $1",
                job_id,
                src.value,
                worker_id,
            )
            await db.execute("ALTER TABLE jobs ENABLE TRIGGER jobs_lifecycle")
            try:
                async with db.transaction():
                    await db.execute(
                        "UPDATE jobs SET status = $2::job_status WHERE id = $1", job_id, dst.value
                    )
                allowed = True
            except asyncpg.CheckViolationError as exc:
                allowed = "illegal job transition" not in str(exc)  # another CHECK: a mismatch
            if allowed != (dst in ALLOWED_TRANSITIONS[src]):
                mismatches.append((src.value, dst.value, allowed))
        finally:
            await tx.rollback()
    assert mismatches == []


async def test_enqueue_with_dependency_racing_its_completion_is_never_stranded(
    pool: asyncpg.Pool[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    """The enqueue share-locks the dependency; the completion blocks on it until the enqueue
    commits. The completion's dependants step (codity_release_dependants, a VOLATILE function
    called after the completion's UPDATE) takes a fresh snapshot, sees the new dependency row and
    releases the child. (Done as a plain CTE of the completion, the statement's older snapshot
    would miss the row and leave the child waiting forever.)"""
    import asyncio

    parent = await enqueue(pool, queue_id, NewJob("parent"))
    (held,) = await claim(pool, worker_id, [queue_id], 1, LEASE_MS)
    async with pool.acquire() as enqueuer, pool.acquire() as completer:
        tx = enqueuer.transaction()
        await tx.start()
        child = await enqueue(enqueuer, queue_id, NewJob("child", depends_on=[parent.id]))
        assert child.status is JobStatus.WAITING
        completing = asyncio.create_task(complete(completer, [Completion(held.fence)]))
        # PostgreSQL says the completion waits on the enqueue's share lock (not merely "has not
        # finished yet"); only then does the enqueue commit.
        await wait_until_blocked(pool, completer.get_server_pid(), enqueuer.get_server_pid())
        await tx.commit()
        assert (await completing).applied == [parent.id]
    row = await pool.fetchrow(
        "SELECT status, pending_dependencies FROM jobs WHERE id = $1", child.id
    )
    assert (row["status"], row["pending_dependencies"]) == ("queued", 0)


async def test_every_operation_finds_rows_only_in_the_project_it_is_given(
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
    worker_id: uuid.UUID,
    queue_project_id: uuid.UUID,
) -> None:
    """Tenant scope in the data layer: with another project (of the same organisation, so a
    guard in front would have let it through), every core operation on a job, a queue or a dead
    letter answers "not found" and changes no row. Break it: drop `q.project_id = $2` from
    lock_job / lock_dead_letters / discard_dead_letters / set_queue_paused, and this fails."""
    org_id = await db.fetchval("SELECT org_id FROM projects WHERE id = $1", queue_project_id)
    other = await make_project(db, org_id, "other")
    dead = await _dead_letter(db, queue_id, worker_id, {"a": 1})
    dl_id = await db.fetchval("SELECT id FROM dead_letter_jobs WHERE job_id = $1", dead)
    waiting = await enqueue(db, queue_id, NewJob("h", delay_s=60))

    async def state() -> list[Any]:
        return [
            tuple(r)
            for r in await db.fetch(
                """SELECT j.id, j.status::text, j.attempt, j.cancel_requested_at, q.is_paused,
                          (SELECT count(*) FROM dead_letter_jobs),
                          (SELECT max(replayed_at) FROM dead_letter_jobs)
                   FROM jobs j JOIN queues q ON q.id = j.queue_id ORDER BY j.id"""
            )
        ]

    before = await state()
    attempts = {
        "cancel_job": lambda: cancel_job(db, other, waiting.id),
        "retry_job": lambda: retry_job(db, other, dead),
        "pause_queue": lambda: pause_queue(db, other, queue_id),
        "resume_queue": lambda: resume_queue(db, other, queue_id),
        "replay_dead_letters": lambda: replay_dead_letters(db, other, [dl_id]),
        "discard_dead_letters": lambda: discard_dead_letters(db, other, [dl_id]),
    }
    for name, attempt in attempts.items():
        with pytest.raises(NotFoundError):
            await attempt()
        assert await state() == before, f"{name} changed a row of another project"
    assert await replay_queue_dead_letters(db, other, queue_id) == []
    assert await state() == before
    # ...and with the right project each of them works (the test above is not vacuous).
    assert await cancel_job(db, queue_project_id, waiting.id) is JobStatus.CANCELLED
    assert await discard_dead_letters(db, queue_project_id, [dl_id]) == 1
