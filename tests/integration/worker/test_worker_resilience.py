"""The worker through connection loss and lease loss, deterministically, in-process.

Connection loss is made real with pg_terminate_backend on every connection the worker holds:
the same thing a database restart does to a client.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import asyncpg
from tests.factories import make_queue, make_worker
from tests.integration.worker.helpers import enqueue, running_worker, wait_for, wait_status

from codity import core
from codity.db.pool import connect
from codity.worker.context import JobContext
from codity.worker.notifier import Notifier
from codity.worker.registry import HandlerRegistry


def gated_registry(gate: asyncio.Event) -> HandlerRegistry:
    r = HandlerRegistry()

    @r.handler("gated")
    async def gated(ctx: JobContext) -> dict[str, int]:
        await gate.wait()
        return {"seq": ctx.execution_seq}

    @r.handler("quick")
    async def quick(ctx: JobContext) -> None:
        return None

    return r


async def _kill_worker_connections(db: asyncpg.Connection[Any]) -> int:
    killed: int = await db.fetchval(
        """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
           WHERE datname = current_database() AND application_name LIKE 'codity-worker%'"""
    )
    return killed


async def test_results_survive_losing_every_connection_and_notify_comes_back(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    """The worker loses every connection mid-job; the result is still written and the
    notifier LISTENs again. "Again" is checked at the notifier itself (the NOTIFY of the next
    enqueue reaches it on the new connection), not by how soon the next job starts: the worker
    wakes its producer on every reconnect and on every freed slot, so a quick start would not
    tell a NOTIFY from those (a version of this test that timed the start stayed green with
    the LISTEN never re-issued)."""
    gate = asyncio.Event()
    queue_id = await make_queue(db)
    job = await enqueue(db, queue_id, "gated")
    async with running_worker(database_url, gated_registry(gate)) as worker:
        (notifier,) = [c for c in worker._components if isinstance(c, Notifier)]
        heard: list[str] = []
        on_notify = notifier._on_notify

        def counting(conn: Any, pid: int, channel: str, payload: str) -> None:
            heard.append(payload)
            on_notify(conn, pid, channel, payload)

        notifier._on_notify = counting  # type: ignore[method-assign]  # the next LISTEN's callback
        await wait_status(db, job, "running")
        assert await _kill_worker_connections(db) >= 2  # the pool and the LISTEN connection
        gate.set()  # the handler finishes while the worker's connections are gone
        await wait_status(db, job, "completed")
        assert await db.fetchval("SELECT result FROM jobs WHERE id = $1", job) == {"seq": 1}

        await wait_for(lambda: asyncio.sleep(0, result=notifier.connected.is_set()))
        follow_up = await enqueue(db, queue_id, "quick")
        await wait_for(lambda: asyncio.sleep(0, result=str(queue_id) in heard))
        await wait_status(db, follow_up, "completed")


async def test_a_result_whose_lease_was_lost_is_dropped_not_written(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    gate = asyncio.Event()
    queue_id = await make_queue(db)
    job = await enqueue(db, queue_id, "gated")
    # capacity 1: the gated job fills the only slot, so the requeued job is not re-claimed by
    # this same worker before the test's second worker takes it. A slow heartbeat, so that the
    # result reaches the completer before a heartbeat notices the loss (that path has its own
    # test below): here the completer's fenced write is what drops it.
    async with running_worker(
        database_url, gated_registry(gate), capacity=1, heartbeat_ms=3000
    ) as worker:
        await wait_status(db, job, "running")
        # The lease runs out (as if the worker had stalled), the reaper requeues the job and a
        # second worker takes it: execution_seq 2 now owns the job.
        # In one transaction: the worker's heartbeat (every 100 ms) must not extend the lease
        # between the expiry and the reap; it waits on the row lock and then finds it requeued.
        async with db.transaction():
            await db.execute(
                "UPDATE jobs SET lock_expires_at = now() - interval '1 second' WHERE id = $1", job
            )
            assert await core.reap_expired(db) == [job]
        other = await make_worker(db, hostname="other")
        (taken,) = await core.claim(db, other, [queue_id], 1, 60_000)
        assert taken.execution_seq == 2
        gate.set()  # the first worker's handler now finishes and reports

        assert worker._completer is not None

        async def dropped() -> bool:
            return worker._completer is not None and worker._completer.lease_lost == 1

        await wait_for(dropped)
    row = await db.fetchrow(
        "SELECT status::text, worker_id, execution_seq, result FROM jobs WHERE id = $1", job
    )
    assert (row["status"], row["worker_id"], row["execution_seq"], row["result"]) == (
        "claimed",
        other,
        2,
        None,
    )
    statuses = await db.fetch("SELECT status::text FROM job_executions WHERE job_id = $1", job)
    assert [r["status"] for r in statuses] == ["lost"]  # no 'completed' row from the stale worker


async def test_a_claim_whose_reply_never_arrives_runs_within_two_lease_periods(
    db: asyncpg.Connection[Any], database_url: str, monkeypatch: Any
) -> None:
    """Break it first (issue 12, item 1): the claim commits, then its connection dies before
    the rows reach the worker. The job is leased under this live, heartbeating worker's id, but
    the worker does not know it holds it. A heartbeat that extended every lease under the id
    would keep it forever; the heartbeat gives it back at once and the job runs."""
    # Two lease periods of 3 s: room for a loaded machine. Without the give-back the job would
    # never run (no reaper here), so the bound separates the mechanism from its absence.
    lease_ms = 3000
    sabotaged: list[int] = []
    real_claim = core.Claimer.claim  # the worker's producer claims through its Claimer

    async def reply_lost(self: core.Claimer, conn: Any, *args: Any, **kwargs: Any) -> Any:
        claimed = await real_claim(self, conn, *args, **kwargs)
        if claimed.jobs and not sabotaged:
            sabotaged.extend(j.id for j in claimed.jobs)
            # committed; now the backend ends before the worker sees the rows
            admin = await connect(database_url)
            try:
                await admin.execute("SELECT pg_terminate_backend($1)", conn.get_server_pid())
            finally:
                await admin.close()
            raise asyncpg.ConnectionDoesNotExistError(
                "connection was closed in the middle of operation"
            )
        return claimed

    monkeypatch.setattr(core.Claimer, "claim", reply_lost)
    queue_id = await make_queue(db)
    job = await enqueue(db, queue_id, "quick")
    async with running_worker(
        database_url, gated_registry(asyncio.Event()), lease_ms=lease_ms, heartbeat_ms=200
    ):
        await wait_for(lambda: asyncio.sleep(0, result=bool(sabotaged)))
        lost_at = time.monotonic()
        await wait_status(db, job, "completed", timeout_s=3 * lease_ms / 1000)
        took = time.monotonic() - lost_at
    assert sabotaged == [job]
    assert took < 2 * lease_ms / 1000, f"ran {took:.2f} s after its claim reply was lost"
    history = await db.fetch(
        "SELECT execution_seq, attempt, status::text FROM job_executions WHERE job_id = $1 "
        "ORDER BY execution_seq",
        job,
    )
    assert [tuple(r) for r in history] == [(1, 1, "lost"), (2, 1, "completed")]


async def test_a_lease_lost_while_running_cancels_the_handler_and_records_nothing(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    """Issue 12, item 2: the lease is reaped during an outage and the job claimed elsewhere; at
    the next heartbeat the async handler is cancelled and the sync handler's outcome is
    discarded: neither is ever recorded (no execution row, no result, no lease-lost write)."""
    async_cancelled = asyncio.Event()
    sync_release = threading.Event()
    sync_returned = threading.Event()
    r = HandlerRegistry()

    @r.handler("async.long")
    async def async_long(ctx: JobContext) -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            async_cancelled.set()
            raise
        return "never"

    @r.handler("sync.long")
    def sync_long(ctx: JobContext) -> str:
        sync_release.wait(20)
        sync_returned.set()
        return "discarded"

    queue_id = await make_queue(db)
    a = await enqueue(db, queue_id, "async.long")
    s = await enqueue(db, queue_id, "sync.long")
    other = await make_worker(db, hostname="other")
    async with running_worker(database_url, r, heartbeat_ms=100, capacity=2) as worker:
        await wait_status(db, a, "running")
        await wait_status(db, s, "running")
        # The outage, in one transaction so this worker cannot take the jobs back in between:
        # leases expired, reaped, claimed by another worker.
        async with db.transaction():
            await db.execute(
                "UPDATE jobs SET lock_expires_at = now() - interval '1 second' "
                "WHERE id = ANY($1::bigint[])",
                [a, s],
            )
            assert sorted(await core.reap_expired(db)) == sorted([a, s])
            taken = await core.claim(db, other, [queue_id], 2, 60_000)
            assert sorted(j.id for j in taken) == sorted([a, s])
        await asyncio.wait_for(async_cancelled.wait(), 5)  # at the next heartbeat

        async def sync_dropped() -> bool:
            return worker.in_flight == 0

        sync_release.set()
        await asyncio.to_thread(sync_returned.wait, 5)
        await wait_for(sync_dropped)
        await asyncio.sleep(0.3)  # a completer flush would have happened by now
        assert worker._completer is not None
        assert worker._completer.lease_lost == 0  # nothing was even sent
        assert worker._completer.recorded == 0
    rows = await db.fetch("SELECT id, status::text, worker_id, result FROM jobs ORDER BY id")
    assert [(r["status"], r["worker_id"], r["result"]) for r in rows] == [
        ("claimed", other, None),
        ("claimed", other, None),
    ]
    statuses = await db.fetch("SELECT status::text FROM job_executions ORDER BY job_id")
    assert [r["status"] for r in statuses] == ["lost", "lost"]  # the reaper's, nothing else
