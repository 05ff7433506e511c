"""A live app (real PostgreSQL behind it) and an authenticated client for the resource tests.

Users, the organisation and memberships are inserted with plain SQL; access tokens are minted
with the app's own `issue_access_token`, so these tests exercise the resources, not sign-in.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest
from asgi_lifespan import LifespanManager
from tests.factories import make_membership, make_tenant, make_user

from codity.api.app import create_app
from codity.api.tokens import issue_access_token
from codity.db.dsn import plain_dsn, with_database
from codity.domain.states import MemberRole
from codity.settings import Settings

TEST_SECRET = "test-secret-" + "x" * 40


def api_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "DATABASE_URL": database_url,
        "CODITY_ENV": "test",
        "JWT_SECRET": TEST_SECRET,
        "JWT_REFRESH_SECRET": TEST_SECRET + "-refresh",
        "EVENTS_STREAM_MAX_S": 0.5,  # see tests/api/conftest.py
        **overrides,
    }
    return Settings(**values)


@dataclass
class ProjectApi:
    client: httpx.AsyncClient
    pool: asyncpg.Pool[Any]
    settings: Settings
    org_id: uuid.UUID
    project_id: uuid.UUID
    headers: dict[str, str]  # the owner's

    def url(self, path: str) -> str:
        """`path` below /api/v1/projects/{project_id}."""
        return f"/api/v1/projects/{self.project_id}{path}"

    async def member(self, role: MemberRole, org_id: uuid.UUID | None = None) -> dict[str, str]:
        """Headers of a new user holding `role` in `org_id` (default: this org)."""
        org = org_id or self.org_id
        user_id = await make_user(self.pool, f"{role.value}-{uuid.uuid4().hex[:8]}@example.test")
        await make_membership(self.pool, org, user_id, role.value)
        token = issue_access_token(self.settings, user_id=user_id, org_id=org, role=role)
        return {"Authorization": f"Bearer {token}"}

    async def outsider(self) -> tuple[uuid.UUID, dict[str, str]]:
        """Another organisation's project and the headers of its owner."""
        other = await make_tenant(self.pool)
        return other.project_id, await self.member(MemberRole.OWNER, other.org_id)

    async def post(self, path: str, json: Any = None, **kw: Any) -> httpx.Response:
        return await self.client.post(self.url(path), json=json, headers=self.headers, **kw)

    async def get(self, path: str, **kw: Any) -> httpx.Response:
        return await self.client.get(self.url(path), headers=self.headers, **kw)

    async def patch(self, path: str, json: Any = None) -> httpx.Response:
        return await self.client.patch(self.url(path), json=json, headers=self.headers)

    async def delete(self, path: str) -> httpx.Response:
        return await self.client.delete(self.url(path), headers=self.headers)

    async def queue(self, name: str | None = None, **fields: Any) -> dict[str, Any]:
        r = await self.post("/queues", {"name": name or f"q-{uuid.uuid4().hex[:8]}", **fields})
        assert r.status_code == 201, r.text
        body: dict[str, Any] = r.json()
        return body


@dataclass(frozen=True)
class LiveApp:
    client: httpx.AsyncClient
    pool: asyncpg.Pool[Any]
    settings: Settings

    async def new_tenant(self) -> ProjectApi:
        """A fresh organisation, project and owner: tests sharing one app never see each other."""
        tenant = await make_tenant(self.pool)
        api = ProjectApi(
            self.client, self.pool, self.settings, tenant.org_id, tenant.project_id, {}
        )
        api.headers = await api.member(MemberRole.OWNER)
        return api


@asynccontextmanager
async def live_app(database_url: str, **settings: Any) -> AsyncIterator[LiveApp]:
    app = create_app(api_settings(database_url, **settings))
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            yield LiveApp(client, app.state.pool, app.state.settings)


@asynccontextmanager
async def project_api(database_url: str, **settings: Any) -> AsyncIterator[ProjectApi]:
    async with live_app(database_url, **settings) as live:
        yield await live.new_tenant()


@asynccontextmanager
async def module_database(pg_server_url: str, template: str) -> AsyncIterator[str]:
    """A database cloned from the migrated template, shared by one test module.

    Cloning costs ~1 s on a busy machine; resource tests isolate themselves by tenant
    instead (each test gets its own organisation and project), so one clone per module is enough.
    """
    name = f"codity_api_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(plain_dsn(pg_server_url))
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await admin.close()
    try:
        yield with_database(pg_server_url, name)
    finally:
        admin = await asyncpg.connect(plain_dsn(pg_server_url))
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def _shared_app(pg_server_url: str, template_database: str) -> AsyncIterator[LiveApp]:
    async with (
        module_database(pg_server_url, template_database) as url,
        live_app(url) as live,
    ):
        yield live


async def _api(shared_app: LiveApp) -> ProjectApi:
    """An owner of a fresh organisation and project, on the module's shared app."""
    return await shared_app.new_tenant()


def resource_fixtures() -> tuple[Any, Any]:
    """The `shared_app` (one app and database per module) and `api` (a fresh tenant per test)
    fixtures, for a test module to bind: `shared_app_fixture, api_fixture = resource_fixtures()`.
    """
    return (
        pytest.fixture(scope="module", name="shared_app")(_shared_app),
        pytest.fixture(name="api")(_api),
    )


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is the error envelope with this status and code."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert error["code"] == code, error
    assert error["message"]
    assert error["request_id"]
    return error
