"""Live events over SSE: one LISTEN per process, coalesced summaries, scoped by project.

These run the app under a real uvicorn server on a free port (the ASGI test transport waits
for the end of a body, and an event stream has none).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import pytest
import uvicorn
from tests.api.project_api import ProjectApi, api_settings
from tests.factories import make_queue

from codity import core
from codity.api.app import create_app
from codity.api.events import MAILBOX_SIZE, RESYNC, WATCH_S, Event, Subscription
from codity.api.tokens import issue_access_token
from codity.db.pool import connect
from codity.db.queries import sql
from codity.domain.states import MemberRole, WorkerStatus

API = "/api/v1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    base_url: str
    app: Any
    pool: asyncpg.Pool[Any]
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()

    async def tenant(self) -> ProjectApi:
        from tests.factories import make_membership, make_tenant, make_user

        tenant = await make_tenant(self.pool)
        user_id = await make_user(self.pool, f"owner-{uuid.uuid4().hex[:8]}@example.test")
        await make_membership(self.pool, tenant.org_id, user_id, "owner")
        token = issue_access_token(
            self.app.state.settings, user_id=user_id, org_id=tenant.org_id, role=MemberRole.OWNER
        )
        client = httpx.AsyncClient(base_url=self.base_url)
        self.clients.append(client)
        return ProjectApi(
            client,
            self.pool,
            self.app.state.settings,
            tenant.org_id,
            tenant.project_id,
            {"Authorization": f"Bearer {token}"},
        )


@pytest.fixture
async def server(database_url: str) -> AsyncIterator[Server]:
    app = create_app(api_settings(database_url, EVENTS_STREAM_MAX_S=60))
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)
    task = asyncio.create_task(uv.serve())
    while not uv.started:
        await asyncio.sleep(0.02)
    await asyncio.wait_for(app.state.events.listening.wait(), 10)
    srv = Server(f"http://127.0.0.1:{port}", app, app.state.pool)
    try:
        yield srv
    finally:
        await srv.close()
        uv.should_exit = True
        await asyncio.wait_for(task, 10)


@dataclass
class Stream:
    """The events one subscriber received, collected in the background."""

    events: list[tuple[str, dict[str, Any], float]] = field(default_factory=list)
    status: int = 0
    task: asyncio.Task[None] | None = None

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [data for k, data, _ in self.events if k == kind]

    async def wait_for(self, predicate: Any, timeout: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for kind, data, _ in self.events:
                if predicate(kind, data):
                    return data
            await asyncio.sleep(0.02)
        raise AssertionError(f"no matching event within {timeout}s; got {self.events}")


@contextlib.asynccontextmanager
async def subscribe(api: ProjectApi, project_id: uuid.UUID | None = None) -> AsyncIterator[Stream]:
    stream = Stream()
    opened = asyncio.Event()
    url = f"{API}/projects/{project_id or api.project_id}/events"

    async def read() -> None:
        async with api.client.stream("GET", url, headers=api.headers, timeout=30) as response:
            stream.status = response.status_code
            opened.set()
            if response.status_code != 200:
                return
            kind, data = "message", ""
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data = line[6:]
                elif line == "" and data:
                    stream.events.append((kind, json.loads(data), time.monotonic()))
                    kind, data = "message", ""

    stream.task = asyncio.create_task(read())
    await asyncio.wait_for(opened.wait(), 10)
    if stream.status == 200:
        await stream.wait_for(lambda k, _d: k == "hello")
    try:
        yield stream
    finally:
        stream.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await stream.task


async def test_job_changes_arrive_coalesced_per_queue_and_status(server: Server) -> None:
    api = await server.tenant()
    queue_id = uuid.UUID((await api.queue("live"))["id"])
    async with subscribe(api) as stream:
        # 200 jobs in one statement: one summary, the newest 20 ids named (the trigger's cap
        # per queue and status), the rest marked truncated.
        jobs = await core.enqueue_many(server.pool, queue_id, [core.NewJob("noop")] * 200)
        first = await stream.wait_for(lambda k, d: k == "jobs")
        assert first["queues"] == {str(queue_id): {"queued": 200}}
        assert len(first["job_ids"]) == 20
        assert first["truncated"] is True
        # 100 separate statements in a burst: a handful of messages, not 100.
        before = len(stream.of("jobs"))
        started = time.monotonic()
        for job in jobs[:100]:
            await core.cancel_job(server.pool, api.project_id, job.id)

        def cancelled() -> int:
            return sum(
                e["queues"].get(str(queue_id), {}).get("cancelled", 0) for e in stream.of("jobs")
            )

        await stream.wait_for(lambda k, d: cancelled() == 100)
        elapsed = time.monotonic() - started
        messages = len(stream.of("jobs")) - before
        # Flushes are 0.25 s apart: never more than ~4 messages a second, however many changes.
        assert messages <= int(elapsed / 0.25) + 2, (messages, elapsed)
        assert messages < 20


async def test_another_tenants_events_never_arrive(server: Server) -> None:
    alice, bob = await server.tenant(), await server.tenant()
    alice_queue = uuid.UUID((await alice.queue("secret"))["id"])
    bob_queue = uuid.UUID((await bob.queue("mine"))["id"])
    async with subscribe(alice) as alice_stream, subscribe(bob) as bob_stream:
        await core.enqueue_many(server.pool, alice_queue, [core.NewJob("noop")] * 5)
        await core.pause_queue(server.pool, alice.project_id, alice_queue)
        await alice_stream.wait_for(lambda k, d: k == "queues")
        await alice_stream.wait_for(lambda k, d: k == "jobs")
        # Bob's own change afterwards proves his stream is alive and was flushed meanwhile.
        await core.enqueue(server.pool, bob_queue, core.NewJob("noop"))
        await bob_stream.wait_for(lambda k, d: k == "jobs")
        assert all(str(alice_queue) not in json.dumps(d) for _, d, _ in bob_stream.events)
        assert bob_stream.of("queues") == []
    # And Bob cannot subscribe to Alice's project at all: the guard answers 404.
    async with subscribe(bob, alice.project_id) as refused:
        assert refused.status == 404


async def test_workers_up_and_down_and_queues_paused_and_resumed(server: Server) -> None:
    api = await server.tenant()
    queue_id = uuid.UUID((await api.queue("work"))["id"])
    async with subscribe(api) as stream:
        worker_id = await core.register_worker(
            server.pool, hostname="h", pid=7, version="t", capacity=2,
            queue_ids=[queue_id], queue_names=["work"],
        )  # fmt: skip
        await stream.wait_for(
            lambda k, d: (
                k == "workers" and {"id": str(worker_id), "status": "active"} in d["workers"]
            )
        )
        await core.set_worker_status(server.pool, worker_id, WorkerStatus.DEAD)
        await stream.wait_for(
            lambda k, d: k == "workers" and {"id": str(worker_id), "status": "dead"} in d["workers"]
        )
        await core.pause_queue(server.pool, api.project_id, queue_id)
        await stream.wait_for(
            lambda k, d: k == "queues" and {"id": str(queue_id), "is_paused": True} in d["queues"]
        )
        await core.resume_queue(server.pool, api.project_id, queue_id)
        await stream.wait_for(
            lambda k, d: k == "queues" and {"id": str(queue_id), "is_paused": False} in d["queues"]
        )


async def test_one_listen_connection_for_many_browsers_and_a_resync_after_it_drops(
    server: Server,
) -> None:
    api = await server.tenant()
    queue_id = uuid.UUID((await api.queue("fan"))["id"])
    async with contextlib.AsyncExitStack() as stack:
        streams = [await stack.enter_async_context(subscribe(api)) for _ in range(20)]
        listeners = await server.pool.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = 'codity-api-events' AND datname = current_database()"
        )
        assert listeners == 1
        await core.enqueue(server.pool, queue_id, core.NewJob("noop"))
        for s in streams:
            await s.wait_for(lambda k, d: k == "jobs")
        # The listener's connection dies: every browser is told to refetch, then events resume.
        await server.pool.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'codity-api-events' AND datname = current_database()"
        )
        for s in streams:
            await s.wait_for(lambda k, d: k == RESYNC, timeout=10)
        await asyncio.wait_for(server.app.state.events.listening.wait(), 10)
        await core.enqueue(server.pool, queue_id, core.NewJob("noop"))
        await streams[0].wait_for(
            lambda k, d: k == "jobs" and len(streams[0].of("jobs")) >= 2, timeout=10
        )


async def test_the_stream_ends_after_its_lifetime(database_url: str) -> None:
    app = create_app(api_settings(database_url, EVENTS_STREAM_MAX_S=0.3))
    port = _free_port()
    uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(uv.serve())
    while not uv.started:
        await asyncio.sleep(0.02)
    try:
        srv = Server(f"http://127.0.0.1:{port}", app, app.state.pool)
        api = await srv.tenant()
        async with api.client.stream(
            "GET", f"{API}/projects/{api.project_id}/events", headers=api.headers
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            body = (await response.aread()).decode()
        assert "event: hello" in body
        assert body.rstrip().split("\n")[-2] == "event: bye"
        await srv.close()
    finally:
        uv.should_exit = True
        await asyncio.wait_for(task, 10)


def test_a_slow_browser_gets_one_resync_instead_of_an_unbounded_backlog() -> None:
    sub = Subscription(uuid.uuid4())
    for i in range(MAILBOX_SIZE * 10):
        sub.offer(Event("jobs", {"changes": i}))
    assert sub.backlog <= MAILBOX_SIZE
    assert sub.dropped > 0
    kinds = []
    while sub.backlog:
        kinds.append(sub._queue.get_nowait().kind)
    assert RESYNC in kinds


async def test_notifications_are_one_per_statement_not_per_job(database_url: str) -> None:
    """The engine's hot path pays one NOTIFY per batch statement: 500 jobs claimed in one
    statement produce one notification, and a heartbeat that moves no status produces none."""
    got: list[str] = []
    listener = await connect(database_url)
    worker_conn = await connect(database_url)
    try:
        await listener.add_listener("codity_events", lambda *a: got.append(a[3]))
        await worker_conn.execute(sql("event_watch"), WATCH_S)  # as a hub with subscribers does
        queue_id = await make_queue(worker_conn)
        await core.enqueue_many(worker_conn, queue_id, [core.NewJob("noop")] * 500)
        worker = await core.register_worker(
            worker_conn, hostname="h", pid=1, version="t", capacity=500,
            queue_ids=[queue_id], queue_names=["q"],
        )  # fmt: skip
        await asyncio.sleep(0.2)
        got.clear()
        claimed = await core.claim(worker_conn, worker, [queue_id], 500, 30_000)
        assert len(claimed) == 500
        await core.heartbeat(worker_conn, worker, 30_000, [j.fence for j in claimed], 500)
        await asyncio.sleep(0.3)
        notes = [json.loads(p) for p in got]
        assert [n["t"] for n in notes] == ["j"], notes
        assert notes[0]["c"][0][1:3] == ["claimed", 500]
        assert len(notes[0]["c"][0][3]) == 20  # ids capped per group
    finally:
        await listener.close()
        await worker_conn.close()


async def test_job_events_are_announced_only_while_a_hub_watches(database_url: str) -> None:
    """Migration 0024: with no dashboard open, no statement on jobs pays for a summary or wakes
    the database's listeners. Break it: drop the triggers' WHEN clause and the first and last
    enqueues are announced too."""
    got: list[str] = []
    listener = await connect(database_url)
    conn = await connect(database_url)
    try:
        await listener.add_listener("codity_events", lambda *a: got.append(a[3]))
        queue_id = await make_queue(conn)

        async def announced_on_enqueue() -> bool:
            got.clear()
            await core.enqueue(conn, queue_id, core.NewJob("noop"))
            await asyncio.sleep(0.3)
            return any(json.loads(p)["t"] == "j" for p in got)

        assert not await announced_on_enqueue()  # no hub has ever watched
        await conn.execute(sql("event_watch"), WATCH_S)
        assert await announced_on_enqueue()
        await conn.execute(sql("event_watch"), -1)  # the last subscriber left: the flag lapsed
        assert not await announced_on_enqueue()
    finally:
        await listener.close()
        await conn.close()
