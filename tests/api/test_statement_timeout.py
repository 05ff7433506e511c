"""Dashboard reads are bounded: the API's connections carry `statement_timeout`
(API_STATEMENT_TIMEOUT_MS) and JIT off, and a statement past the bound answers 503
`statement_timeout` with the error envelope, releasing its connection. Behind a pooler
(DATABASE_DIRECT_URL set) no startup parameter is sent and the client's own deadline holds."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from fastapi import FastAPI
from tests.api.conftest import API, app_client, make_settings, register_and_login

from codity.api.app import create_app
from codity.db.pool import connect


async def _blocked_jobs_read(app: FastAPI, db: asyncpg.Connection[Any]) -> Any:
    """GET the Jobs screen's first page while another session holds `jobs` locked: the read
    waits on the lock until a timeout ends it."""
    async with app_client(app) as client:
        who = await register_and_login(client, db, org_name="Slow Org")
        locker = await connect(app.state.settings.database_url)
        try:
            await locker.execute("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
            r = await asyncio.wait_for(
                client.get(f"{API}/projects/{who.project_id}/jobs", headers=who.headers), 30
            )
            # The statement was cancelled, not left waiting behind the lock.
            waiting = await db.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'codity-api'"
                " AND wait_event_type = 'Lock' AND datname = current_database()"
            )
            settings = await app.state.pool.fetchrow(
                "SELECT current_setting('statement_timeout') AS timeout,"
                " current_setting('jit') AS jit"
            )
        finally:
            await locker.close()
    return r, waiting, settings


async def test_a_read_past_the_timeout_answers_503_statement_timeout(
    database_url: str, api_db: asyncpg.Connection[Any]
) -> None:
    app = create_app(make_settings(database_url, API_STATEMENT_TIMEOUT_MS=300))
    r, waiting, settings = await _blocked_jobs_read(app, api_db)
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "statement_timeout"
    assert r.json()["error"]["request_id"] == r.headers["x-request-id"]
    assert waiting == 0
    # The bound is PostgreSQL's own (not only the client's deadline 1 s later), and JIT is off.
    assert (settings["timeout"], settings["jit"]) == ("300ms", "off")


async def test_behind_a_pooler_the_clients_deadline_still_bounds_a_read(
    database_url: str, api_db: asyncpg.Connection[Any]
) -> None:
    app = create_app(
        make_settings(database_url, API_STATEMENT_TIMEOUT_MS=300, DATABASE_DIRECT_URL=database_url)
    )
    r, waiting, settings = await _blocked_jobs_read(app, api_db)
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "statement_timeout"
    assert waiting == 0
    # No startup parameters: PgBouncer refuses the ones it does not know.
    assert settings["timeout"] == "0"
