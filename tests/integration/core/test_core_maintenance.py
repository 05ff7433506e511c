"""Reaper (refund, fencing), promoter, dead-worker sweep, prune."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from tests.integration.core.helpers import executions, expire_leases, job_row, new_worker

from codity.core import (
    Completion,
    Failure,
    LogEntry,
    NewJob,
    append_logs,
    claim,
    complete,
    enqueue,
    fail,
    heartbeat,
    mark_running,
    promote_due,
    prune,
    reap_expired,
    release,
    report_progress,
    set_worker_status,
    sweep_dead_workers,
)
from codity.domain.errors import ValidationError
from codity.domain.states import WorkerStatus

LEASE_MS = 30_000


async def test_fencing_stale_worker_cannot_complete_reclaimed_job(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    a, b = await new_worker(db), await new_worker(db)
    job = await enqueue(db, queue_id, NewJob("h"))
    (held_by_a,) = await claim(db, a, [queue_id], 1, LEASE_MS)
    await mark_running(db, [held_by_a.fence])
    await expire_leases(db, job.id)
    assert await reap_expired(db) == [job.id]
    (held_by_b,) = await claim(db, b, [queue_id], 1, LEASE_MS)
    assert held_by_b.execution_seq == held_by_a.execution_seq + 1

    stale = await complete(db, [Completion(held_by_a.fence, {"from": "A"})])
    assert stale.applied == []
    assert stale.lease_lost == [job.id]
    row = await job_row(db, job.id)
    assert row["status"] == "claimed"
    assert row["worker_id"] == b
    assert row["result"] is None
    # every other fenced write from A is refused too
    assert not await report_progress(db, held_by_a.fence, 50)
    assert not await append_logs(db, held_by_a.fence, [LogEntry("info", "hi")])
    assert (await mark_running(db, [held_by_a.fence])).lease_lost == [job.id]

    fresh = await complete(db, [Completion(held_by_b.fence, {"from": "B"})])
    assert fresh.applied == [job.id]
    assert (await job_row(db, job.id))["result"] == {"from": "B"}
    assert [(e["status"], e["worker_id"]) for e in await executions(db, job.id)] == [
        ("lost", a),
        ("completed", b),
    ]


#: Each fenced write a stalled worker could still attempt with the fence it held before its lease
#: ran out; each must be refused on its own (the test is parametrised per write so that removing
#: the `execution_seq` term from any single statement fails its own case).
STALE_WRITES = {
    "complete": lambda db, f: complete(db, [Completion(f, {"from": "stale"})]),
    "fail": lambda db, f: fail(db, [Failure(f, "stale failure")]),
    "release": lambda db, f: release(db, [f]),
    "mark_running": lambda db, f: mark_running(db, [f]),
    "report_progress": lambda db, f: report_progress(db, f, 50, "stale"),
    "append_logs": lambda db, f: append_logs(db, f, [LogEntry("info", "stale")]),
}


@pytest.mark.parametrize("write", sorted(STALE_WRITES))
async def test_fencing_same_worker_reclaiming_its_reaped_job_refuses_the_stale_write(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID, write: str
) -> None:
    """The case execution_seq exists for: one worker stalls past its lease, its job is reaped
    and then claimed again by the SAME worker. Job and worker match; only execution_seq tells
    the stale attempt from the live one, so the stale write must change nothing."""
    job = await enqueue(db, queue_id, NewJob("h", max_attempts=1))
    (stale,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    await mark_running(db, [stale.fence])
    await expire_leases(db, job.id)
    assert await reap_expired(db) == [job.id]
    (live,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    assert (live.fence.worker_id, live.execution_seq) == (worker_id, stale.execution_seq + 1)
    before = dict(await job_row(db, job.id))

    outcome = await STALE_WRITES[write](db, stale.fence)

    if isinstance(outcome, bool):
        assert outcome is False
    else:
        assert (outcome.applied, outcome.lease_lost) == ([], [job.id])
    assert dict(await job_row(db, job.id)) == before  # not one column changed
    assert [(e["execution_seq"], e["status"]) for e in await executions(db, job.id)] == [
        (1, "lost")
    ]
    assert await db.fetchval("SELECT count(*) FROM job_logs") == 0
    assert await db.fetchval("SELECT count(*) FROM dead_letter_jobs") == 0
    # The live attempt is untouched and still completes.
    assert (await complete(db, [Completion(live.fence, {"from": "live"})])).applied == [job.id]
    assert (await job_row(db, job.id))["result"] == {"from": "live"}


async def _reclaimed_by_same_worker(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> tuple[Any, Any]:
    """A job claimed, reaped (its lease ran out) and claimed again by the same worker: the two
    fences differ only by execution_seq."""
    job = await enqueue(db, queue_id, NewJob("h", max_attempts=1))
    (stale,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    await mark_running(db, [stale.fence])
    await expire_leases(db, job.id)
    assert await reap_expired(db) == [job.id]
    (live,) = await claim(db, worker_id, [queue_id], 1, 1_000)  # a short lease: extension shows
    assert (live.fence.worker_id, live.execution_seq) == (worker_id, stale.execution_seq + 1)
    return stale, live


async def _lease_left_s(db: asyncpg.Connection[Any], job_id: int) -> float:
    left: float = await db.fetchval(
        "SELECT extract(epoch FROM lock_expires_at - now()) FROM jobs WHERE id = $1", job_id
    )
    return left


async def test_fencing_same_worker_stale_heartbeat_does_not_extend_the_new_attempt(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    """A heartbeat that names only the stale attempt (the worker lost track of the new claim,
    say its reply never arrived) must not keep the new attempt's lease alive: the stale fence
    is reported lost and the new attempt, which the worker does not hold, is given back."""
    stale, live = await _reclaimed_by_same_worker(db, queue_id, worker_id)

    beat = await heartbeat(db, worker_id, LEASE_MS, [stale.fence])

    assert (beat.extended, beat.lost_fences, beat.released) == (0, [stale.fence], [live.id])
    row = await job_row(db, live.id)
    assert (row["status"], row["lock_expires_at"], row["attempt"]) == ("queued", None, 0)
    assert [(e["execution_seq"], e["status"]) for e in await executions(db, live.id)] == [
        (1, "lost"),
        (2, "lost"),
    ]


async def test_fencing_same_worker_heartbeat_extends_only_the_live_attempt(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    """The worker holds both attempts (the stale handler still winding down beside the new
    one): the beat extends the new lease, reports the stale fence lost, gives nothing back."""
    stale, live = await _reclaimed_by_same_worker(db, queue_id, worker_id)
    assert await _lease_left_s(db, live.id) < 2

    beat = await heartbeat(db, worker_id, LEASE_MS, [stale.fence, live.fence])

    assert (beat.extended, beat.lost_fences, beat.released) == (1, [stale.fence], [])
    assert await _lease_left_s(db, live.id) > LEASE_MS / 1000 - 5
    row = await job_row(db, live.id)
    assert (row["status"], row["execution_seq"]) == ("claimed", live.execution_seq)


async def test_three_reaps_of_a_three_attempt_job_do_not_dead_letter(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    job = await enqueue(db, queue_id, NewJob("h", max_attempts=3))
    for seq in (1, 2, 3, 4):
        (j,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
        assert j.attempt == 1  # refunded every time
        assert j.execution_seq == seq  # identity never repeats
        await expire_leases(db, job.id)
        assert await reap_expired(db) == [job.id]
    row = await job_row(db, job.id)
    assert row["status"] == "queued"
    assert row["attempt"] == 0
    assert [e["status"] for e in await executions(db, job.id)] == ["lost"] * 4
    assert await db.fetchval("SELECT count(*) FROM dead_letter_jobs") == 0


async def test_reaper_leaves_live_leases_alone(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    await enqueue(db, queue_id, NewJob("h"))
    (held,) = await claim(db, worker_id, [queue_id], 1, 1)
    await heartbeat(db, worker_id, LEASE_MS, [held.fence])  # a live worker keeps its job
    assert await reap_expired(db) == []


async def test_promote_due_moves_only_due_jobs(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    due = await enqueue(db, queue_id, NewJob("h", delay_s=3600))
    later = await enqueue(db, queue_id, NewJob("h", delay_s=3600))
    await db.execute("UPDATE jobs SET run_at = now() - interval '1 s' WHERE id = $1", due.id)
    assert await promote_due(db) == 1
    assert (await job_row(db, due.id))["status"] == "queued"
    assert (await job_row(db, later.id))["status"] == "scheduled"


async def test_sweep_marks_silent_workers_dead_and_freezes_uptime(
    db: asyncpg.Connection[Any],
) -> None:
    alive, silent = await new_worker(db), await new_worker(db)
    await db.execute(
        "UPDATE workers SET last_heartbeat_at = now() - interval '5 minutes' WHERE id = $1", silent
    )
    assert await sweep_dead_workers(db, 60_000) == [silent]
    rows = {r["id"]: r for r in await db.fetch("SELECT id, status, stopped_at FROM workers")}
    assert rows[silent]["status"] == "dead"
    assert rows[silent]["stopped_at"] is not None
    assert rows[alive]["status"] == "active"
    assert rows[alive]["stopped_at"] is None
    assert await sweep_dead_workers(db, 60_000) == []  # dead once, stopped_at not moved
    with pytest.raises(ValidationError):
        await sweep_dead_workers(db, 0)


async def test_a_dead_worker_that_beats_again_is_active_again(db: asyncpg.Connection[Any]) -> None:
    worker = await new_worker(db)
    await db.execute(
        "UPDATE workers SET last_heartbeat_at = now() - interval '5 minutes' WHERE id = $1", worker
    )
    assert await sweep_dead_workers(db, 60_000) == [worker]
    await heartbeat(db, worker, LEASE_MS, [])
    row = await db.fetchrow("SELECT status, stopped_at FROM workers WHERE id = $1", worker)
    assert (row["status"], row["stopped_at"]) == ("active", None)
    stopped = await new_worker(db)
    await set_worker_status(db, stopped, WorkerStatus.STOPPED)
    await heartbeat(db, stopped, LEASE_MS, [])  # a stopped worker is not revived by a late beat
    assert await db.fetchval("SELECT status FROM workers WHERE id = $1", stopped) == "stopped"


async def test_progress_and_logs_are_fenced_writes(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    job = await enqueue(db, queue_id, NewJob("h"))
    (j,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    assert await report_progress(db, j.fence, 40, "almost")
    row = await job_row(db, job.id)
    assert (row["progress"], row["progress_message"]) == (40, "almost")
    with pytest.raises(ValidationError):
        await report_progress(db, j.fence, 101)
    ok = await append_logs(
        db,
        j.fence,
        [LogEntry("info", "one", {"n": 1}), LogEntry("warn", "x" * 10_000, {"obj": object()})],
    )
    assert ok
    logs = await db.fetch("SELECT * FROM job_logs WHERE job_id = $1 ORDER BY id", job.id)
    assert [(r["level"], r["execution_seq"]) for r in logs] == [("info", 1), ("warn", 1)]
    assert len(logs[1]["message"].encode()) <= 4096
    assert isinstance(logs[1]["fields"]["obj"], str)


async def test_prune_deletes_old_finished_jobs_and_logs_in_batches(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    for _ in range(7):
        await enqueue(db, queue_id, NewJob("h"))
    jobs = await claim(db, worker_id, [queue_id], 5, LEASE_MS)
    await append_logs(db, jobs[0].fence, [LogEntry("info", "m")])
    await complete(db, [Completion(j.fence) for j in jobs[1:]])  # jobs[0] is still running
    await db.execute(
        "UPDATE jobs SET finished_at = now() - interval '2 days' WHERE status = 'completed'"
    )
    await db.execute("UPDATE job_logs SET created_at = now() - interval '2 days'")
    cutoff = datetime.now(UTC) - timedelta(days=1)
    result = await prune(db, finished_before=cutoff, logs_before=cutoff, batch=2)
    assert result.jobs == 4
    assert result.logs == 1
    assert await db.fetchval("SELECT count(*) FROM jobs") == 3  # the unfinished ones stay
    assert await db.fetchval("SELECT count(*) FROM job_executions") == 0  # cascaded
