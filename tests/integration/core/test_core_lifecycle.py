"""Claim, run, heartbeat, complete, fail, release: the happy paths and their bookkeeping."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from tests.factories import make_project, make_queue, make_tenant, project_of
from tests.integration.core.helpers import executions, job_row, new_worker

from codity.core import (
    ClaimCursor,
    Claimer,
    Completion,
    Failure,
    Fence,
    NewJob,
    advance_cursors,
    claim,
    claim_round,
    complete,
    enqueue,
    enqueue_many,
    fail,
    heartbeat,
    mark_running,
    pause_queue,
    release,
    resume_queue,
)
from codity.core.claim import DRY_CURSOR_LAG
from codity.db.pool import connect
from codity.domain.states import JobStatus

LEASE_MS = 30_000


async def test_claim_sets_lease_and_identity(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    job = await enqueue(db, queue_id, NewJob("h", {"k": 1}, timeout_ms=99))
    (c,) = await claim(db, worker_id, [queue_id], 10, LEASE_MS)
    assert (c.id, c.handler, c.payload, c.attempt, c.execution_seq, c.timeout_ms) == (
        job.id,
        "h",
        {"k": 1},
        1,
        1,
        99,
    )
    assert c.fence.worker_id == worker_id
    row = await job_row(db, job.id)
    assert row["status"] == "claimed"
    assert row["worker_id"] == worker_id
    lease = await db.fetchval("SELECT extract(epoch FROM lock_expires_at - now()) FROM jobs")
    assert 25 < lease <= 30
    assert await claim(db, worker_id, [queue_id], 10, LEASE_MS) == []


@pytest.mark.parametrize("flow", [False, True], ids=["claim_jobs", "claim_jobs_flow"])
async def test_a_claim_by_an_unregistered_worker_is_refused_and_claims_nothing(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, flow: bool
) -> None:
    """The worker id is checked once per claim statement (it has no foreign key: migration
    0015); without the check the job would be leased to nobody the fleet knows."""
    job = await enqueue(db, queue_id, NewJob("h"))
    claimer = Claimer(uuid.uuid4(), LEASE_MS, flow_first=flow)
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await claimer.claim(db, [queue_id], 10)
    row = await job_row(db, job.id)
    assert (row["status"], row["worker_id"], row["attempt"]) == ("queued", None, 0)


@pytest.mark.parametrize("flow", [False, True], ids=["claim_jobs", "claim_jobs_flow"])
async def test_a_claimed_jobs_run_at_comes_back_to_the_microsecond(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID, flow: bool
) -> None:
    """The claim sends run_at as microseconds since the Unix epoch (claim.sql); the cursor is
    built from it and compared with the index's own run_at, so it must be exact: an odd
    microsecond, a date before 1970, and one far from it (all past: enqueued as queued)."""
    due = [
        datetime(2024, 12, 7, 12, 34, 56, 789_123, tzinfo=UTC),
        datetime(1969, 7, 20, 20, 17, 40, 999_999, tzinfo=UTC),
        datetime(1901, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    ]
    made = await enqueue_many(db, queue_id, [NewJob("h", run_at=at) for at in due])
    got = (await Claimer(worker_id, LEASE_MS, flow_first=flow).claim(db, [queue_id], 10)).jobs
    assert {g.id: g.run_at for g in got} == {m.id: at for m, at in zip(made, due, strict=True)}
    # and the cursor taken after the last of them starts exactly behind it
    assert ClaimCursor.after(got[-1]) == ClaimCursor(0, due[0], made[0].id)


async def test_claim_order_priority_then_age(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    made = await enqueue_many(db, queue_id, [NewJob("h", priority=p) for p in (0, 5, 0, 9, 5)])
    got = await claim(db, worker_id, [queue_id], 10, LEASE_MS)
    ids = [m.id for m in made]
    assert [g.id for g in got] == [ids[3], ids[1], ids[4], ids[0], ids[2]]


async def test_claim_never_exceeds_limit_across_queues(
    db: asyncpg.Connection[Any], worker_id: uuid.UUID
) -> None:
    q1, q2 = await make_queue(db), await make_queue(db)
    await db.execute("UPDATE queues SET priority = 10 WHERE id = $1", q2)
    await enqueue_many(db, q1, [NewJob("a") for _ in range(5)])
    await enqueue_many(db, q2, [NewJob("b") for _ in range(3)])
    got = await claim(db, worker_id, [q1, q2], 4, LEASE_MS)
    assert len(got) == 4
    assert [g.handler for g in got] == ["b", "b", "b", "a"]  # higher-priority queue first


async def test_paused_queue_yields_nothing(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    await enqueue(db, queue_id, NewJob("h"))
    await pause_queue(db, await project_of(db, queue_id), queue_id)
    assert await claim(db, worker_id, [queue_id], 10, LEASE_MS) == []
    await resume_queue(db, await project_of(db, queue_id), queue_id)
    assert len(await claim(db, worker_id, [queue_id], 10, LEASE_MS)) == 1


async def test_run_and_complete_writes_one_execution(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    await enqueue_many(db, queue_id, [NewJob("h") for _ in range(3)])
    jobs = await claim(db, worker_id, [queue_id], 10, LEASE_MS)
    assert (await mark_running(db, [j.fence for j in jobs])).applied == [j.id for j in jobs]
    res = await complete(db, [Completion(j.fence, {"ok": j.id}) for j in jobs])
    assert res.applied == [j.id for j in jobs]
    assert res.lease_lost == []
    for j in jobs:
        row = await job_row(db, j.id)
        assert row["status"] == "completed"
        assert row["result"] == {"ok": j.id}
        assert row["finished_at"] is not None
        (ex,) = await executions(db, j.id)
        assert (ex["status"], ex["attempt"], ex["execution_seq"], ex["queue_id"]) == (
            "completed",
            1,
            1,
            queue_id,
        )
        assert ex["started_at"] is not None
        assert ex["worker_id"] == worker_id
    # completing twice is a lease loss, not a second execution row
    again = await complete(db, [Completion(jobs[0].fence)])
    assert again.lease_lost == [jobs[0].id]
    assert len(await executions(db, jobs[0].id)) == 1


async def test_heartbeat_extends_all_leases_in_one_statement(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    other = await new_worker(db)
    await enqueue_many(db, queue_id, [NewJob("h") for _ in range(4)])
    mine = await claim(db, worker_id, [queue_id], 3, 1_000)
    theirs = await claim(db, other, [queue_id], 1, 1_000)
    result = await heartbeat(db, worker_id, 60_000, [j.fence for j in mine], in_flight=3)
    assert result.extended == 3
    assert result.cancel_requested == []
    leases = await db.fetch("SELECT id, extract(epoch FROM lock_expires_at - now()) AS s FROM jobs")
    by_id = {r["id"]: r["s"] for r in leases}
    assert all(by_id[j.id] > 50 for j in mine)
    assert by_id[theirs[0].id] < 2  # another worker's lease is not touched
    w = await db.fetchrow(
        "SELECT in_flight, last_heartbeat_at FROM workers WHERE id = $1", worker_id
    )
    assert w["in_flight"] == 3
    await heartbeat(db, worker_id, 60_000, [j.fence for j in mine], in_flight=1)
    hb = await db.fetchrow(
        "SELECT beats, max_in_flight FROM worker_heartbeats WHERE worker_id = $1", worker_id
    )
    assert hb is not None
    assert hb["beats"] >= 1
    assert hb["max_in_flight"] >= 1


async def test_release_refunds_attempt(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    await enqueue(db, queue_id, NewJob("h", max_attempts=1))
    for seq in (1, 2, 3):  # drained three times, never charged, never dead-lettered
        (j,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
        assert j.attempt == 1
        assert j.execution_seq == seq
        await mark_running(db, [j.fence])
        assert (await release(db, [j.fence])).applied == [j.id]
        row = await job_row(db, j.id)
        assert row["status"] == "queued"
        assert row["attempt"] == 0
    assert [e["status"] for e in await executions(db, j.id)] == ["released"] * 3


async def test_fail_retries_with_backoff_then_dead_letters(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    job = await enqueue(db, queue_id, NewJob("h", {"p": 1}, max_attempts=2))
    (j,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    await fail(db, [Failure(j.fence, "boom", "Traceback...")])
    row = await job_row(db, job.id)
    assert row["status"] == JobStatus.SCHEDULED
    assert row["last_error"] == "boom"
    await db.execute("UPDATE jobs SET run_at = now(), status = 'queued' WHERE id = $1", job.id)
    (j,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    assert j.attempt == 2
    res = await fail(db, [Failure(j.fence, "boom again", kind="timeout")])
    assert res.applied == [job.id]
    row = await job_row(db, job.id)
    assert row["status"] == "dead_letter"
    assert row["finished_at"] is not None
    dl = await db.fetchrow("SELECT * FROM dead_letter_jobs WHERE job_id = $1", job.id)
    assert (dl["payload"], dl["error"], dl["attempts"], dl["queue_id"], dl["handler"]) == (
        {"p": 1},
        "boom again",
        2,
        queue_id,
        "h",
    )
    assert [(e["status"], e["error"]) for e in await executions(db, job.id)] == [
        ("failed", "boom"),
        ("timed_out", "boom again"),
    ]


async def test_unknown_handler_dead_letters_at_once(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    job = await enqueue(db, queue_id, NewJob("nope", max_attempts=5))
    (j,) = await claim(db, worker_id, [queue_id], 1, LEASE_MS)
    await fail(db, [Failure(j.fence, "no handler 'nope'", kind="unknown_handler")])
    assert (await job_row(db, job.id))["status"] == "dead_letter"


async def test_awkward_results_and_errors_do_not_sink_the_batch(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    """One handler returning a datetime or NaN, or an error with a NUL byte, must not make the
    whole flushed batch fail: the worker would lose every other job's outcome with it."""
    import datetime as dt

    await enqueue_many(db, queue_id, [NewJob("h", max_attempts=1) for _ in range(4)])
    a, b, c, d = await claim(db, worker_id, [queue_id], 4, LEASE_MS)
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    res = await complete(
        db,
        [
            Completion(a.fence, {"at": when}),
            Completion(b.fence, float("nan")),
            Completion(c.fence, 7),
        ],
    )
    assert res.applied == [a.id, b.id, c.id]
    assert (await job_row(db, a.id))["result"] == {"at": str(when)}
    assert (await job_row(db, b.id))["result"] == {"unstorable_result": "float"}
    assert (await job_row(db, c.id))["result"] == 7
    await fail(db, [Failure(d.fence, "bad\x00byte", "tb\x00")])
    assert (await job_row(db, d.id))["last_error"] == "bad\\x00byte"


async def _one_beat(
    db: asyncpg.Connection[Any], worker_id: uuid.UUID, fences: list[Fence]
) -> tuple[int, int]:
    """(rows updated in jobs, of which HOT) by one heartbeat, from this backend's counters not
    yet flushed to the statistics (pg_stat_get_xact_*), read before and after the beat in one
    transaction (they are flushed only between transactions)."""
    counters = (
        "SELECT pg_stat_get_xact_tuples_updated('jobs'::regclass) AS updated,"
        " pg_stat_get_xact_tuples_hot_updated('jobs'::regclass) AS hot"
    )
    async with db.transaction():
        before = await db.fetchrow(counters)
        result = await heartbeat(db, worker_id, 60_000, fences)
        after = await db.fetchrow(counters)
    assert before is not None
    assert after is not None
    assert result.extended == len(fences)
    return after["updated"] - before["updated"], after["hot"] - before["hot"]


@pytest.mark.parametrize("expiry_indexed", [False, True], ids=["schema", "twin-expiry-indexed"])
async def test_heartbeat_extends_leases_in_place(
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
    worker_id: uuid.UUID,
    expiry_indexed: bool,
) -> None:
    """A beat changes only `lock_expires_at`, which no index holds (migration 0034), so each
    extension is a HOT update: no new entry in any index of jobs. The twin indexes the expiry
    again, as idx_jobs_lease_expiry did, and no extension is HOT."""
    if expiry_indexed:
        await db.execute(
            "CREATE INDEX twin_lease_expiry ON jobs (lock_expires_at)"
            " WHERE status IN ('claimed', 'running')"
        )
    await enqueue_many(db, queue_id, [NewJob("h") for _ in range(5)])
    fences = [j.fence for j in await claim(db, worker_id, [queue_id], 5, 1_000)]
    updated, hot = await _one_beat(db, worker_id, fences)
    assert updated == 5
    assert hot == (0 if expiry_indexed else 5)


async def test_heartbeat_extends_only_held_leases_and_gives_back_the_rest(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    """A job leased under the worker's id that the worker does not hold (a claim whose reply
    never arrived) goes back to the queue at once, refunded, with a 'lost' execution row; a
    held fence that no longer matches is reported lost; nothing else is touched."""
    other = await new_worker(db)
    await enqueue_many(db, queue_id, [NewJob("h") for _ in range(4)])
    kept, stray, gone = await claim(db, worker_id, [queue_id], 3, 1_000)
    (theirs,) = await claim(db, other, [queue_id], 1, 1_000)
    # `gone` was reaped and re-claimed by the other worker meanwhile: this fence is stale
    await db.execute(
        "UPDATE jobs SET execution_seq = execution_seq + 1, worker_id = $2 WHERE id = $1",
        gone.id,
        other,
    )
    result = await heartbeat(db, worker_id, 60_000, [kept.fence, gone.fence])
    assert result.extended == 1
    assert result.lost == [gone.id]
    assert result.released == [stray.id]
    row = await job_row(db, stray.id)
    assert (row["status"], row["attempt"], row["lock_expires_at"]) == ("queued", 0, None)
    (ex,) = await executions(db, stray.id)
    assert (ex["status"], ex["attempt"], ex["execution_seq"]) == ("lost", 1, 1)
    leases = await db.fetch("SELECT id, extract(epoch FROM lock_expires_at - now()) AS s FROM jobs")
    by_id = {r["id"]: r["s"] for r in leases}
    assert by_id[kept.id] > 50
    assert by_id[theirs.id] < 2  # another worker's lease is not touched, nor given back
    assert (await job_row(db, theirs.id))["status"] == "claimed"


async def _index_entries_read(db: asyncpg.Connection[Any]) -> int:
    await db.execute("SELECT pg_stat_force_next_flush()")  # this session's counts, now
    await db.execute("SELECT pg_stat_clear_snapshot()")
    n: int = await db.fetchval(
        "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'idx_jobs_claim'"
    )
    return n


async def _claim_reads(
    db: asyncpg.Connection[Any],
    worker_id: uuid.UUID,
    queue_id: uuid.UUID,
    cursor: ClaimCursor | None,
) -> tuple[int, list[int]]:
    """How many claim-index entries a claim of 10 reads, and the ids it claims (rolled back)."""
    cursors = {queue_id: cursor} if cursor else None
    before = await _index_entries_read(db)
    tx = db.transaction()
    await tx.start()
    try:
        ids = [j.id for j in await claim(db, worker_id, [queue_id], 10, LEASE_MS, cursors)]
    finally:
        await tx.rollback()
    return await _index_entries_read(db) - before, sorted(ids)


async def test_a_cursor_claim_skips_claimed_jobs_a_held_snapshot_keeps_in_the_index(
    db: asyncpg.Connection[Any], database_url: str, queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    """The xmin mechanism: with a REPEATABLE READ transaction open elsewhere, the index entries
    of claimed jobs cannot be vacuumed; a claim from the front of the index steps over all of
    them, a claim that starts after its cursor does not. Same jobs, same order."""
    made = await enqueue_many(db, queue_id, [NewJob("h") for _ in range(3000)])
    holder = await connect(database_url)
    try:
        await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await holder.fetchval("SELECT count(*) FROM jobs")  # the snapshot is taken now
        taken = []
        for _ in range(29):
            taken += await claim(db, worker_id, [queue_id], 100, LEASE_MS)
        await db.execute("VACUUM jobs")  # can remove nothing the snapshot may still see
        cursor = ClaimCursor.after(taken[-1])
        front, front_ids = await _claim_reads(db, worker_id, queue_id, None)
        after, after_ids = await _claim_reads(db, worker_id, queue_id, cursor)
    finally:
        await holder.close()
    expected = sorted(m.id for m in made[2900:2910])
    assert front_ids == after_ids == expected
    # from the front: the 2,900 entries of claimed jobs, then 10; after the cursor: about 10
    print(f"claim-index entries read: from the front {front}, after the cursor {after}")
    assert front >= 2900
    assert after < 100, f"the cursor claim read {after} index entries (from the front: {front})"


async def test_a_job_given_back_behind_the_cursor_is_found_by_the_next_full_claim(
    db: asyncpg.Connection[Any], queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    """The cursor's price: a job that comes back with an older key is behind it; a claim
    without the cursor (the producer makes one every CURSOR_RESCAN_S) finds it."""
    await enqueue_many(db, queue_id, [NewJob("h") for _ in range(3)])
    first, second = await claim(db, worker_id, [queue_id], 2, LEASE_MS)
    await release(db, [first.fence])
    cursor = {queue_id: ClaimCursor.after(second)}
    assert cursor[queue_id] is not None
    (third,) = await claim(db, worker_id, [queue_id], 5, LEASE_MS, cursor)  # type: ignore[arg-type]
    assert third.id not in (first.id, second.id)
    (again,) = await claim(db, worker_id, [queue_id], 5, LEASE_MS)
    assert again.id == first.id


async def test_a_claimer_that_lost_every_race_moves_its_cursor_past_what_the_others_took(
    db: asyncpg.Connection[Any], database_url: str, queue_id: uuid.UUID, worker_id: uuid.UUID
) -> None:
    """A claim that finds a queue dry says so, and its cursor moves to DRY_CURSOR_LAG behind the
    claim's clock: the next claim does not step over the index entries of the 2,999 jobs
    another worker took after this one's cursor (a held snapshot keeps every one of them).
    Break it: with the cursor left where it was (no ran_dry rule), the same claim reads them
    all."""
    long_ago = datetime.now(UTC) - timedelta(minutes=10)
    await enqueue_many(db, queue_id, [NewJob("h", run_at=long_ago) for _ in range(3000)])
    other = await new_worker(db)
    holder = await connect(database_url)
    try:
        await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await holder.fetchval("SELECT count(*) FROM jobs")  # the snapshot is taken now
        cursors: dict[uuid.UUID, ClaimCursor] = {}
        advance_cursors(cursors, await claim_round(db, worker_id, [queue_id], 1, LEASE_MS))
        stale = cursors[queue_id]
        for _ in range(30):
            await claim(db, other, [queue_id], 100, LEASE_MS)
        await db.execute("VACUUM jobs")  # can remove nothing the snapshot may still see
        dry = await claim_round(db, worker_id, [queue_id], 10, LEASE_MS, cursors)
        assert (dry.jobs, dry.ran_dry) == ([], (queue_id,))
        assert dry.scanned_at is not None
        advance_cursors(cursors, dry)
        assert cursors[queue_id] == ClaimCursor(0, dry.scanned_at - DRY_CURSOR_LAG, 0)
        fresh = await enqueue_many(db, queue_id, [NewJob("h") for _ in range(10)])
        moved, moved_ids = await _claim_reads(db, worker_id, queue_id, cursors[queue_id])
        kept, kept_ids = await _claim_reads(db, worker_id, queue_id, stale)
    finally:
        await holder.close()
    assert moved_ids == kept_ids == sorted(f.id for f in fresh)
    print(f"claim-index entries read: moved cursor {moved}, cursor left behind {kept}")
    assert kept >= 2999
    assert moved < 100, f"the moved cursor's claim read {moved} index entries (kept: {kept})"


async def test_a_queue_that_gave_nothing_because_it_was_full_or_paused_did_not_run_dry(
    db: asyncpg.Connection[Any], worker_id: uuid.UUID
) -> None:
    """Only a queue read to the end with room to spare ran dry: a queue at its concurrency
    limit (its queued jobs were not looked for) or paused keeps its cursor, or the next claims
    would start after its oldest jobs. A claim that filled its limit says nothing."""
    project = await project_of(db, await make_queue(db))
    full = await make_queue(db, project, concurrency_limit=1)
    paused = await make_queue(db, project, is_paused=True)
    empty = await make_queue(db, project)
    for q in (full, paused):
        await enqueue_many(db, q, [NewJob("h") for _ in range(3)])
    await claim(db, worker_id, [full], 1, LEASE_MS)
    round_ = await claim_round(db, worker_id, [full, paused, empty], 10, LEASE_MS)
    assert (round_.jobs, round_.ran_dry) == ([], (empty,))
    await enqueue_many(db, empty, [NewJob("h") for _ in range(3)])
    filled = await claim_round(db, worker_id, [paused, empty], 2, LEASE_MS)
    assert (len(filled.jobs), filled.ran_dry) == (2, ())
    cursors: dict[uuid.UUID, ClaimCursor] = {}
    advance_cursors(cursors, round_)
    assert set(cursors) == {empty}


async def test_a_claim_says_it_drained_its_queues_only_when_a_freed_slot_could_find_nothing(
    db: asyncpg.Connection[Any], worker_id: uuid.UUID
) -> None:
    """`drained` lets the worker skip the claim a freed slot would set off (worker.producer).
    It must be False whenever a queue may still hold a job that claim could take: a claim that
    filled its limit, a queue that gave as many as its concurrency limit left room for (or
    none, at the limit), a round with flow control. True only when every queue gave less than
    it was allowed; a paused queue's jobs are not claimable, so they do not count."""
    project = await project_of(db, await make_queue(db))
    plain = await make_queue(db, project)
    await enqueue_many(db, plain, [NewJob("h") for _ in range(3)])
    filled = await claim_round(db, worker_id, [plain], 2, LEASE_MS)
    assert (len(filled.jobs), filled.drained) == (2, False)
    emptied = await claim_round(db, worker_id, [plain], 10, LEASE_MS)
    assert (len(emptied.jobs), emptied.drained) == (1, True)
    assert (await claim_round(db, worker_id, [plain], 10, LEASE_MS)).drained

    limited = await make_queue(db, project, concurrency_limit=2)
    await enqueue_many(db, limited, [NewJob("h") for _ in range(5)])
    capped = await claim_round(db, worker_id, [plain, limited], 10, LEASE_MS)
    assert (len(capped.jobs), capped.drained) == (2, False)  # gave all its limit allowed
    at_limit = await claim_round(db, worker_id, [plain, limited], 10, LEASE_MS)
    assert (at_limit.jobs, at_limit.drained) == ([], False)  # its jobs were not looked for

    paused = await make_queue(db, project, is_paused=True)
    await enqueue_many(db, paused, [NewJob("h") for _ in range(3)])
    assert (await claim_round(db, worker_id, [plain, paused], 10, LEASE_MS)).drained
    assert (await claim_round(db, worker_id, [paused], 10, LEASE_MS)).drained  # nothing served

    keyed = await make_queue(db, project, key_concurrency_limit=1)
    await enqueue_many(db, keyed, [NewJob("h", concurrency_key="k") for _ in range(2)])
    flow = await claim_round(db, worker_id, [plain, keyed], 10, LEASE_MS)
    assert (len(flow.jobs), flow.drained) == (1, False)


async def test_a_fair_claim_drained_its_queues_when_the_shares_offered_every_job(
    db: asyncpg.Connection[Any], worker_id: uuid.UUID
) -> None:
    """A fair claim (claim_jobs_flow with fair shares) of plain queues says it drained them
    when the shares add up to less than the claim (each queue's share is then all it has: an
    empty queue's share is 0) and it took them all; when the shares fill the claim, a queue
    given less than it has (room left for the other project) was not drained. Break it: read
    a share of 0 as "held back" (or give the fair claim no `drained` at all, as before) and a
    fair worker never drains, so every freed slot sets off another claim (2 claims per job at
    a trickle: tests/integration/worker/test_worker_claims.py)."""
    tenant = await make_tenant(db)
    a = await make_queue(db, tenant.project_id)
    b = await make_queue(db, await make_project(db, tenant.org_id))
    await enqueue_many(db, a, [NewJob("h") for _ in range(3)])
    took_all = await claim_round(db, worker_id, [a, b], 10, LEASE_MS, fair=True)
    assert (len(took_all.jobs), took_all.drained) == (3, True)
    assert (await claim_round(db, worker_id, [a, b], 10, LEASE_MS, fair=True)).drained

    await enqueue_many(db, a, [NewJob("h") for _ in range(20)])
    await enqueue_many(db, b, [NewJob("h") for _ in range(20)])
    shared = await claim_round(db, worker_id, [a, b], 10, LEASE_MS, fair=True)
    assert len(shared.jobs) == 10
    assert {j.queue_id for j in shared.jobs} == {a, b}
    assert not shared.drained

    limited = await make_queue(db, await make_project(db, tenant.org_id), concurrency_limit=1)
    await enqueue_many(db, limited, [NewJob("h") for _ in range(3)])
    capped = await claim_round(db, worker_id, [limited], 10, LEASE_MS, fair=True)
    assert (len(capped.jobs), capped.drained) == (1, False)  # gave all its limit allowed


async def test_a_fair_claim_short_of_jobs_another_claimer_holds_did_not_drain(
    db: asyncpg.Connection[Any], database_url: str, worker_id: uuid.UUID
) -> None:
    """The shares count a queue's jobs without locking them; when another claimer holds some
    (its claim not yet committed), the claim skips them and comes back short while the other
    queue still has jobs it left for them. Not drained: the shares filled the claim. Break
    it: without the shares' sum in `drained`, this claim says drained and its worker would
    leave those jobs to the poll."""
    tenant = await make_tenant(db)
    a = await make_queue(db, tenant.project_id)
    b = await make_queue(db, await make_project(db, tenant.org_id))
    await enqueue_many(db, a, [NewJob("h") for _ in range(20)])
    await enqueue_many(db, b, [NewJob("h") for _ in range(5)])
    other = await connect(database_url)
    try:
        async with other.transaction():
            await other.execute("SELECT 1 FROM jobs WHERE queue_id = $1 FOR UPDATE", b)
            short = await claim_round(db, worker_id, [a, b], 10, LEASE_MS, fair=True)
    finally:
        await other.close()
    assert {j.queue_id for j in short.jobs} == {a}
    assert len(short.jobs) == 5  # a's share: b's five were offered, and held by the other
    assert not short.drained
