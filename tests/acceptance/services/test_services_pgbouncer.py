"""Through PgBouncer in transaction pooling mode (Debian's pgbouncer 1.18: no protocol-level
prepared statements in that mode): the API, enqueue on every driver, an application's
`codity.App` on its own pool (async and sync) and the scheduler (a delayed job promoted, a cron
schedule fired) work through it, the worker claims and completes through it, and the LISTENs go
direct (DATABASE_DIRECT_URL): a NOTIFY still wakes the worker (the poll interval is 30 s here,
and every job completes within seconds), and the API's live-events stream delivers the job
enqueued through it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import uuid
from typing import Any

import asyncpg
import httpx
import psycopg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from tests import pgbouncer as bouncer
from tests.acceptance.services.service_procs import Procs, wait_workers
from tests.accounts import sign_up
from tests.factories import make_queue, make_schedule, make_tenant
from tests.waiting import wait_for

from codity import core

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _pgbouncer_installed() -> None:
    # Before the test's other fixtures: a skip on a laptop, a failure in CI (tests/prerequisites.py).
    bouncer.require()


#: Statements prepared per driver the way PgBouncer 1.18 in transaction mode requires.
ASYNCPG = {"statement_cache_size": 0}
PSYCOPG = {"prepare_threshold": None}
SQLALCHEMY_ASYNCPG = {
    "statement_cache_size": 0,
    "prepared_statement_cache_size": 0,
    # SQLAlchemy's asyncpg adapter always prepares (named) inside its transaction: unique
    # names keep a reused server connection from answering "already exists".
    "prepared_statement_name_func": lambda: f"__codity_{uuid.uuid4().hex}__",
}
ROUNDS = 6  # more than psycopg's default prepare_threshold (5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _job(i: int, driver: str) -> core.NewJob:
    return core.NewJob("noop", {"driver": driver, "i": i})


async def _enqueue_on_every_driver(url: str, queue_id: uuid.UUID) -> list[int]:
    ids: list[int] = []
    conn = await asyncpg.connect(url, **ASYNCPG)
    try:
        for i in range(ROUNDS):
            async with conn.transaction():
                ids.append((await core.enqueue(conn, queue_id, _job(i, "asyncpg"))).id)
    finally:
        await conn.close()
    async with await psycopg.AsyncConnection.connect(url, **PSYCOPG) as pconn:
        for i in range(ROUNDS):
            ids.append((await core.enqueue(pconn, queue_id, _job(i, "psycopg-async"))).id)
            await pconn.commit()
    engine = create_async_engine(
        url.replace("postgresql://", "postgresql+asyncpg://"), connect_args=SQLALCHEMY_ASYNCPG
    )
    try:
        for i in range(ROUNDS):
            async with AsyncSession(engine) as session, session.begin():
                ids.append((await core.enqueue(session, queue_id, _job(i, "sqlalchemy"))).id)
    finally:
        await engine.dispose()

    def sync_drivers() -> list[int]:
        made = []
        with psycopg.Connection.connect(url, **PSYCOPG) as sconn:
            for i in range(ROUNDS):
                made.append(core.enqueue_sync(sconn, queue_id, _job(i, "psycopg")).id)
                sconn.commit()
        sync_engine = create_engine(
            url.replace("postgresql://", "postgresql+psycopg://"), connect_args=PSYCOPG
        )
        try:
            for i in range(ROUNDS):
                with Session(sync_engine) as session, session.begin():
                    made.append(core.enqueue_sync(session, queue_id, _job(i, "sa-sync")).id)
        finally:
            sync_engine.dispose()
        return made

    ids.extend(await asyncio.to_thread(sync_drivers))
    # A bulk enqueue and a delayed job, which only the
    # scheduler's promoter (through PgBouncer too) can make claimable.
    bulk = await asyncpg.connect(url, **ASYNCPG)
    try:
        many = [_job(i, "bulk") for i in range(20)]
        ids.extend(j.id for j in await core.enqueue_many(bulk, queue_id, many))
        later = core.NewJob("noop", {"driver": "delayed"}, delay_s=1)
        ids.append((await core.enqueue(bulk, queue_id, later)).id)
    finally:
        await bulk.close()
    return ids


async def _api_project(
    http: httpx.AsyncClient, db: asyncpg.Connection[Any]
) -> tuple[str, dict[str, str]]:
    """Sign up through the API (an org, a project) and create a `bounced` queue in it."""
    token, project = await sign_up(
        http, db, email=f"bouncer-{uuid.uuid4().hex[:6]}@codity.test", name="B",
        password="correct-horse-battery-staple", org_name="Bounced", prefix="",
    )  # fmt: skip
    headers = {"Authorization": f"Bearer {token}"}
    made = await http.post(f"/projects/{project}/queues", json={"name": "bounced"},
                           headers=headers)  # fmt: skip
    assert made.status_code == 201, made.text
    return project, headers


async def _enqueue_through_the_api(
    http: httpx.AsyncClient, project: str, headers: dict[str, str]
) -> int:
    job = await http.post(f"/projects/{project}/jobs", headers=headers,
                          json={"queue": "bounced", "handler": "noop", "payload": {"via": "api"}})  # fmt: skip
    assert job.status_code == 201, job.text
    listed = await http.get(f"/projects/{project}/jobs", headers=headers)
    assert listed.status_code == 200, listed.text
    return int(job.json()["id"])


#: An application on codity's public API, in a process of its own: `codity.App()` takes its
#: database (PgBouncer) and project from the environment and enqueues on the App's own pool,
#: async and sync, more times than a prepared-statement cache would survive.
APPLICATION = """
import asyncio, json, codity

app = codity.App()

@app.task(queue="bounced", name="noop")
async def noop(round: int) -> None: ...

async def main() -> list[int]:
    made = [(await noop.enqueue(i)).id for i in range(ROUNDS)]
    await app.aclose()
    return made

ids = asyncio.run(main())
ids += [noop.enqueue_sync(i).id for i in range(ROUNDS)]
app.close()
print(json.dumps(ids))
"""


def _run_application(bounced: str, project: str) -> list[int]:
    env = {**os.environ, "DATABASE_URL": bounced, "DATABASE_STATEMENT_CACHE_SIZE": "0",
           "CODITY_PROJECT": project, "CODITY_ENV": "test"}  # fmt: skip
    env.pop("TEST_DATABASE_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", f"ROUNDS = {ROUNDS}\n{APPLICATION}"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "prepared statement" not in out.stderr
    return [int(i) for i in json.loads(out.stdout.strip().splitlines()[-1])]


class EventStream:
    """`GET /projects/{id}/events` read in the background: the `jobs` events' job ids."""

    def __init__(self, http: httpx.AsyncClient, project: str, headers: dict[str, str]) -> None:
        self.job_ids: set[int] = set()
        self.kinds: list[str] = []
        self.opened = asyncio.Event()
        self._task = asyncio.create_task(self._read(http, f"/projects/{project}/events", headers))

    async def _read(self, http: httpx.AsyncClient, path: str, headers: dict[str, str]) -> None:
        async with http.stream("GET", path, headers=headers, timeout=None) as response:
            assert response.status_code == 200
            kind = ""
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                    self.kinds.append(kind)
                    if kind == "hello":
                        self.opened.set()
                elif line.startswith("data: ") and kind == "jobs":
                    self.job_ids.update(json.loads(line[6:])["job_ids"])

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await self._task


async def test_api_enqueue_scheduler_and_worker_through_pgbouncer(
    procs: Procs, database_url: str, db: asyncpg.Connection[Any]
) -> None:
    tenant = await make_tenant(db)
    queue_id = await make_queue(db, tenant.project_id, name="bounced")
    with bouncer.pgbouncer(database_url) as bounced:
        try:
            await _run_through(procs, db, database_url, bounced, queue_id)
        finally:
            procs.stop_all()  # before PgBouncer goes: their logs then end with the test
    for name in ("api", "worker", "scheduler"):
        assert "prepared statement" not in procs.logs(procs.started_named(name)), name


async def _run_through(
    procs: Procs, db: asyncpg.Connection[Any], database_url: str, bounced: str, queue_id: uuid.UUID
) -> None:
    env = {
        "DATABASE_URL": bounced,
        "DATABASE_STATEMENT_CACHE_SIZE": "0",
        "WORKER_POLL_INTERVAL_MS": "30000",  # only a NOTIFY can wake it in time
    }
    # The LISTENs (the worker's notifier, the API's live events) need a session: direct.
    direct = {**env, "DATABASE_DIRECT_URL": database_url}
    port = _free_port()
    procs.spawn("api", "--port", str(port), env=direct, name="api")
    procs.spawn("scheduler", env=env, name="scheduler")
    base = f"http://127.0.0.1:{port}"

    async def api_ready() -> bool:
        try:
            async with httpx.AsyncClient() as http:
                return (await http.get(f"{base}/readyz", timeout=1)).status_code == 200
        except httpx.TransportError:
            return False

    await wait_for(api_ready, timeout_s=30, what="the API through pgbouncer")
    http = httpx.AsyncClient(base_url=base + "/api/v1", timeout=10)
    project, headers = await _api_project(http, db)
    # Started once both `bounced` queues exist: a worker given queue names resolves them once.
    procs.spawn("worker", "-q", "bounced", "-c", "20", env=direct, name="worker")
    await wait_workers(db, 1, listening=False)  # the LISTEN is checked at the end
    events = EventStream(http, project, headers)
    try:
        await asyncio.wait_for(events.opened.wait(), 10)
        await _enqueue_everything(db, http, bounced, queue_id, project, headers, events)
    finally:
        await events.close()
        await http.aclose()
    # The worker's LISTEN is a direct session; its claims and completions went through
    # PgBouncer (whose server connections carry the worker's application_name too).
    listen = await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
        "'codity-worker-listen' AND query ILIKE 'LISTEN%'"
    )
    assert listen == 1


async def _enqueue_everything(
    db: asyncpg.Connection[Any],
    http: httpx.AsyncClient,
    bounced: str,
    queue_id: uuid.UUID,
    project: str,
    headers: dict[str, str],
    events: EventStream,
) -> None:
    """Every way a job is made, through PgBouncer, then all of them completed by the worker."""
    ids = await _enqueue_on_every_driver(bounced, queue_id)
    via_api = await _enqueue_through_the_api(http, project, headers)
    ids.append(via_api)
    ids.extend(await asyncio.to_thread(_run_application, bounced, project))
    # A cron schedule, fired by the scheduler through PgBouncer.
    schedule = await make_schedule(db, queue_id, next_run_at=await db.fetchval("SELECT now()"))

    async def fired() -> int | None:
        job_id = await db.fetchval("SELECT id FROM jobs WHERE schedule_id = $1", schedule)
        return int(job_id) if job_id is not None else None

    ids.append(await wait_for(fired, timeout_s=20, what="the cron schedule fired"))

    async def all_completed() -> bool:
        done = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE id = ANY($1::bigint[]) AND status = 'completed'",
            ids,
        )
        return bool(done == len(ids))

    await wait_for(all_completed, timeout_s=20, what=f"{len(ids)} jobs completed")
    assert len(set(ids)) == len(ids) == 5 * ROUNDS + 20 + 2 + 2 * ROUNDS + 1
    # The API's live events heard the job enqueued through it (a LISTEN through PgBouncer in
    # transaction mode hears nothing: it lands on whichever server connection ran it).
    await wait_for(lambda: _heard(events, via_api), timeout_s=10, what="the job's live event")


async def _heard(events: EventStream, job_id: int) -> bool:
    return job_id in events.job_ids
