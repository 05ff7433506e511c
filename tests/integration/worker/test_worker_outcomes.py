"""A real Worker (in-process) against real PostgreSQL: what happens to each kind of attempt.

Bad input never crashes the worker: an unknown handler dead-letters its job with a clear reason,
and a handler that raises, hangs past its timeout or returns a non-JSON result fails that
attempt only, while the worker goes on to run the next job.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from tests.factories import make_queue, make_retry_policy, make_tenant, project_of
from tests.integration.worker.helpers import enqueue, running_worker, wait_for, wait_status

from codity.worker.context import JobContext
from codity.worker.registry import HandlerRegistry


def registry() -> HandlerRegistry:
    r = HandlerRegistry()

    @r.handler("echo")
    async def echo(ctx: JobContext) -> Any:
        return {"echo": ctx.payload, "attempt": ctx.attempt, "job_id": ctx.job_id}

    @r.handler("sync.add")
    def add(ctx: JobContext) -> int:  # a sync handler: runs in the thread pool
        return int(ctx.payload["a"]) + int(ctx.payload["b"])

    @r.handler("boom")
    async def boom(ctx: JobContext) -> None:
        raise RuntimeError("the handler blew up")

    @r.handler("hang")
    async def hang(ctx: JobContext) -> None:
        await asyncio.sleep(3600)

    @r.handler("not-json")
    async def not_json(ctx: JobContext) -> object:
        return object()

    return r


async def test_async_and_sync_handlers_complete_with_their_results(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    queue_id = await make_queue(db)
    a = await enqueue(db, queue_id, "echo", {"x": 1})
    b = await enqueue(db, queue_id, "sync.add", {"a": 2, "b": 40})
    async with running_worker(database_url, registry()):
        await wait_status(db, a, "completed")
        await wait_status(db, b, "completed")
    row_a = await db.fetchrow("SELECT result, attempt FROM jobs WHERE id = $1", a)
    assert row_a["result"] == {"echo": {"x": 1}, "attempt": 1, "job_id": a}
    assert await db.fetchval("SELECT result FROM jobs WHERE id = $1", b) == 42
    execs = await db.fetch("SELECT job_id, status::text FROM job_executions ORDER BY job_id")
    assert [(r["job_id"], r["status"]) for r in execs] == [(a, "completed"), (b, "completed")]


async def test_unknown_handler_dead_letters_with_a_clear_reason_and_the_worker_carries_on(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    queue_id = await make_queue(db)
    bad = await enqueue(db, queue_id, "no.such.handler", {"k": "v"})
    good = await enqueue(db, queue_id, "echo", {})
    async with running_worker(database_url, registry()):
        await wait_status(db, bad, "dead_letter")
        await wait_status(db, good, "completed")
    dead = await db.fetchrow("SELECT error, attempts FROM dead_letter_jobs WHERE job_id = $1", bad)
    assert "unknown handler 'no.such.handler'" in dead["error"]
    assert "echo" in dead["error"]  # says which handlers this worker does have
    assert dead["attempts"] == 1  # no retries: retrying cannot make the handler appear


async def test_raise_timeout_and_non_json_fail_that_attempt_only(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    queue_id = await make_queue(db, default_max_attempts=1)
    boom = await enqueue(db, queue_id, "boom")
    hang = await enqueue(db, queue_id, "hang", timeout_ms=300)
    not_json = await enqueue(db, queue_id, "not-json")
    after = await enqueue(db, queue_id, "echo", {"still": "alive"})
    async with running_worker(database_url, registry(), capacity=4):
        for job_id in (boom, hang, not_json):
            await wait_status(
                db, job_id, "dead_letter"
            )  # max_attempts 1: the failed attempt is final
        await wait_status(db, after, "completed")
    rows = {
        r["job_id"]: r
        for r in await db.fetch("SELECT job_id, status::text, error, traceback FROM job_executions")
    }
    assert rows[boom]["status"] == "failed"
    assert rows[boom]["error"] == "RuntimeError: the handler blew up"
    assert "the handler blew up" in rows[boom]["traceback"]
    assert rows[hang]["status"] == "timed_out"
    assert rows[hang]["error"] == "timed out after 300 ms"
    assert rows[not_json]["status"] == "failed"
    assert "not JSON-serialisable" in rows[not_json]["error"]
    assert rows[after]["status"] == "completed"


async def test_failed_attempt_is_retried_and_then_succeeds(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    import codity.worker.handlers.basic  # noqa: F401  registers `fail` in the default registry
    from codity.worker.registry import default_registry

    tenant = await make_tenant(db)
    policy = await make_retry_policy(
        db, tenant.project_id, strategy="fixed", base_delay_ms=0, max_delay_ms=0, jitter=False
    )
    queue_id = await make_queue(db, tenant.project_id, retry_policy_id=policy)
    job = await enqueue(db, queue_id, "fail", {"until_attempt": 2})
    async with running_worker(database_url, default_registry):
        await wait_status(db, job, "completed")
    assert await db.fetchval("SELECT attempt FROM jobs WHERE id = $1", job) == 2
    statuses = await db.fetch(
        "SELECT status::text FROM job_executions WHERE job_id = $1 ORDER BY execution_seq", job
    )
    assert [r["status"] for r in statuses] == ["failed", "completed"]


async def test_cancel_request_reaches_the_running_handler_at_the_next_heartbeat(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    from codity import core

    queue_id = await make_queue(db)
    job = await enqueue(db, queue_id, "hang")
    async with running_worker(database_url, registry(), heartbeat_ms=100):
        await wait_status(db, job, "running")
        assert await core.cancel_job(db, await project_of(db, queue_id), job) in (
            "running",
            "claimed",
        )
        await wait_status(db, job, "cancelled", timeout_s=5)
    execution = await db.fetchval("SELECT status::text FROM job_executions WHERE job_id = $1", job)
    assert execution == "cancelled"


async def test_producer_never_claims_more_than_free_slots(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    """Break-it check: a producer that claimed `capacity` jobs per round regardless of the jobs
    already running would run more than 2 handlers at once here."""
    r = HandlerRegistry()
    running = peak = 0

    @r.handler("nap")
    async def nap(ctx: JobContext) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1

    queue_id = await make_queue(db)
    ids = [await enqueue(db, queue_id, "nap") for _ in range(12)]
    async with running_worker(database_url, r, capacity=2, poll_interval_ms=20):

        async def all_done() -> bool:
            return bool(
                await db.fetchval(
                    "SELECT bool_and(status = 'completed') FROM jobs WHERE id = ANY($1)", ids
                )
            )

        await wait_for(all_done, timeout_s=15)
    assert peak == 2  # kept busy, never over capacity


async def test_fast_jobs_skip_running_but_keep_their_start_time_and_slow_ones_show_running(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    """A job that finishes within MARK_RUNNING_AFTER_S goes claimed -> completed (one UPDATE
    saved) with its handler's start time recorded; a slow one is visibly `running`."""
    r = registry()
    release = asyncio.Event()

    @r.handler("slow")
    async def slow(ctx: JobContext) -> str:
        await release.wait()
        return "done"

    queue_id = await make_queue(db)
    fast = await enqueue(db, queue_id, "echo", {"x": 1})
    slow_job = await enqueue(db, queue_id, "slow", {})
    async with running_worker(database_url, r):
        await wait_status(db, fast, "completed")
        await wait_status(db, slow_job, "running")
        release.set()
        await wait_status(db, slow_job, "completed")
    for job_id in (fast, slow_job):
        row = await db.fetchrow(
            """SELECT j.claimed_at, j.started_at, j.finished_at, e.started_at AS exec_started
               FROM jobs j JOIN job_executions e ON e.job_id = j.id WHERE j.id = $1""",
            job_id,
        )
        assert row["started_at"] is not None
        assert row["exec_started"] == row["started_at"]
        assert row["claimed_at"] <= row["started_at"] <= row["finished_at"]


async def test_a_sync_handler_outliving_its_timeout_holds_its_slot_and_shows_in_the_worker_row(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    """Issue 12, item 3: a sync handler that ignores ctx.cancelled keeps its thread after its
    attempt timed out (Python cannot stop a thread). The worker counts that thread against its
    capacity, claims nothing beyond it while the thread lingers, and shows it in its row."""
    import threading

    from tests.integration.worker.helpers import job_status

    release = threading.Event()
    r = HandlerRegistry()

    @r.handler("stuck.sync")
    def stuck(ctx: JobContext) -> str:
        release.wait(30)  # ignores ctx.cancelled on purpose
        return "too late"

    @r.handler("quick")
    async def quick(ctx: JobContext) -> None:
        return None

    queue_id = await make_queue(db)
    stuck_job = await enqueue(db, queue_id, "stuck.sync", timeout_ms=200, max_attempts=1)
    try:
        async with running_worker(database_url, r, capacity=1, heartbeat_ms=100) as worker:
            await wait_status(db, stuck_job, "dead_letter")  # timed out; its thread runs on
            later = await enqueue(db, queue_id, "quick")

            async def shown() -> bool:
                return bool(await db.fetchval("SELECT lingering_threads = 1 FROM workers"))

            await wait_for(shown)
            await asyncio.sleep(0.5)  # several poll rounds and wake-ups
            assert worker.lingering_threads == 1
            assert await job_status(db, later) == "queued"  # its only slot is held
            release.set()
            await wait_status(db, later, "completed")

            async def cleared() -> bool:
                return bool(await db.fetchval("SELECT lingering_threads = 0 FROM workers"))

            await wait_for(cleared)
            assert worker.lingering_threads == 0
    finally:
        release.set()
    row = await db.fetchrow("SELECT status::text, result FROM jobs WHERE id = $1", stuck_job)
    assert (row["status"], row["result"]) == ("dead_letter", None)  # the late return is ignored
