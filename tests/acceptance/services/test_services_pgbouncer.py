"""Through PgBouncer in transaction pooling mode (Debian's pgbouncer 1.18: no protocol-level
prepared statements in that mode): the API, enqueue on every driver and the scheduler work
through it, the worker claims and completes through it, and its LISTEN goes direct
(DATABASE_DIRECT_URL), so a NOTIFY still wakes it: the poll interval is 30 s here, and every
job completes within seconds."""

from __future__ import annotations

import asyncio
import socket
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
from tests.factories import make_queue, make_tenant
from tests.waiting import wait_for

from codity import core

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not bouncer.available(),
        reason="PGBOUNCER NOT INSTALLED: `.ci/run` installs Debian's pgbouncer; "
        "apt-get install -y pgbouncer",
    ),
]

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
    if True:
        env = {
            "DATABASE_URL": bounced,
            "DATABASE_STATEMENT_CACHE_SIZE": "0",
            "WORKER_POLL_INTERVAL_MS": "30000",  # only a NOTIFY can wake it in time
        }
        port = _free_port()
        procs.spawn("api", "--port", str(port), env=env, name="api")
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
        procs.spawn("worker", "-q", "bounced", "-c", "20", env={**env, "DATABASE_DIRECT_URL": database_url},
                    name="worker")  # fmt: skip
        await wait_workers(db, 1, listening=False)  # the LISTEN is checked at the end
        ids = await _enqueue_on_every_driver(bounced, queue_id)
        ids.append(await _enqueue_through_the_api(http, project, headers))
        await http.aclose()

        async def all_completed() -> bool:
            done = await db.fetchval(
                "SELECT count(*) FROM jobs WHERE id = ANY($1::bigint[]) AND status = 'completed'",
                ids,
            )
            return bool(done == len(ids))

        await wait_for(all_completed, timeout_s=20, what=f"{len(ids)} jobs completed")
        assert len(set(ids)) == len(ids) == 5 * ROUNDS + 20 + 2
        # The worker's LISTEN is a direct session; its claims and completions went through
        # PgBouncer (whose server connections carry the worker's application_name too).
        listen = await db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
            "'codity-worker-listen' AND query ILIKE 'LISTEN%'"
        )
        assert listen == 1
