"""A request whose database connection breaks answers 503 `database_unavailable` (retryable),
whatever form asyncpg gives the breakage; an asyncpg error that is a bug stays a 500. The
30-second outage with real processes is tests/acceptance/services/test_services_db_outage.py;
here each form of breakage is raised inside a real request through the app's own handlers."""

from __future__ import annotations

import asyncpg
import pytest
from fastapi import FastAPI
from tests.api.conftest import app_client, make_settings

from codity.api.app import create_app

RAISED: dict[str, Exception] = {
    "lost-mid-protocol": asyncpg.InternalClientError("unexpected connection_lost() call"),
    "torn-state": asyncpg.InternalClientError("cannot switch to state 12; another operation (2) is in progress"),
    "closed-mid-operation": asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    "closed": asyncpg.InterfaceError("connection is closed"),
    "admin-shutdown": asyncpg.AdminShutdownError("terminating connection due to administrator command"),
    "refused": ConnectionRefusedError(111, "Connect call failed"),
    "client-bug": asyncpg.InternalClientError("got result for unknown protocol state 3"),
    "busy-connection-bug": asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
}  # fmt: skip


@pytest.fixture
def app(database_url: str) -> FastAPI:
    app = create_app(make_settings(database_url))

    async def fail(kind: str) -> None:
        raise RAISED[kind]

    app.add_api_route("/test-raise/{kind}", fail)
    return app


@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [
        ("lost-mid-protocol", 503, "database_unavailable"),
        ("torn-state", 503, "database_unavailable"),
        ("closed-mid-operation", 503, "database_unavailable"),
        ("closed", 503, "database_unavailable"),
        ("admin-shutdown", 503, "database_unavailable"),
        ("refused", 503, "database_unavailable"),
        ("client-bug", 500, "internal_error"),
        ("busy-connection-bug", 500, "internal_error"),
    ],
)
async def test_a_broken_connection_is_503_and_a_bug_is_500(
    app: FastAPI, kind: str, status: int, code: str
) -> None:
    async with app_client(app) as client:
        r = await client.get(f"/test-raise/{kind}")
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"]["code"] == code
    assert body["error"]["request_id"] == r.headers["x-request-id"]
    assert "Traceback" not in r.text
    if status == 503:
        assert r.headers["retry-after"] == "1"
