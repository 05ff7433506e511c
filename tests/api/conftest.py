"""API test fixtures: the app bound to this test's database, an ASGI client, and people.

- `api_settings` / `app` / `client`: a fresh app per test over the test's own database, driven
  in-process through httpx's ASGI transport with the lifespan running (asgi-lifespan).
- `register_and_login(client, db, ...)`: a verified owner with their org, signed in -> `Session`
  (registration and verification through the API are tested in test_auth.py).
- `refresh_headers(session)`: the refresh cookie and the CSRF header, for /auth/refresh|logout.
- `owner`: a registered owner (its org, default project and tokens).
- `make_org_user(role)`: another person in the owner's org with that role -> `Session`.
- `outsider`: the owner of a second organisation.
- `make_api_key(session, role=..., project_id=...)`: a project API key -> (key, key id).

Accounts made by `make_org_user` are inserted with a password hash computed once per session
(argon2 costs ~50 ms per hash), then sign in through the real login endpoint.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import asyncpg
import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from tests.factories import make_membership, make_tenant, make_user

from codity.api.app import create_app
from codity.api.cookies import CSRF_HEADER, REFRESH_COOKIE
from codity.cli.smtp_sink import smtp_sink
from codity.domain.passwords import hash_password
from codity.settings import Settings

API = "/api/v1"
PASSWORD = "correct horse battery staple"
_emails = itertools.count()

# Hashed once for the whole run: users inserted directly share it.
_PASSWORD_HASH = hash_password(PASSWORD)


@dataclass
class Session:
    user_id: uuid.UUID
    email: str
    org_id: uuid.UUID
    project_id: uuid.UUID
    access_token: str
    refresh_token: str  # the httpOnly cookie's value
    csrf_token: str
    role: str = "owner"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access_token}"}


def unique_email(prefix: str = "user") -> str:
    return f"{prefix}-{next(_emails)}-{uuid.uuid4().hex[:6]}@example.com"


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "CODITY_ENV": "test",
        "DATABASE_URL": database_url,
        "JWT_SECRET": "test-secret-" + "x" * 32,
        "JWT_REFRESH_SECRET": "test-refresh-secret-" + "y" * 32,
        # Tests make many auth calls from one client address; the ceiling has its own test.
        "RATE_LIMIT_AUTH_PER_MINUTE": 10_000,
        # The event stream never ends on its own; walkers of every route (isolation, schemathesis)
        # read it through the ASGI transport, which waits for the end of the body.
        "EVENTS_STREAM_MAX_S": 0.5,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture
def api_settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture(scope="session")
def shared_app() -> FastAPI:
    """Built once: assembling ~60 routes costs about a second. Each test points it at its own
    database (app.state.settings) before starting its lifespan. A test that changes the app
    itself (adds a route) must build its own with `create_app`."""
    return create_app(make_settings("postgresql://unused@localhost/unused"))


@pytest.fixture
def app(shared_app: FastAPI, api_settings: Settings) -> FastAPI:
    shared_app.state.settings = api_settings
    return shared_app


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(app) as c:
        yield c


class app_client:
    """An httpx client over ASGI with the app's lifespan running. 500s come back as responses
    (raise_app_exceptions=False) so a test sees exactly what a client would."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._manager = LifespanManager(app)
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> httpx.AsyncClient:
        await self._manager.__aenter__()
        transport = httpx.ASGITransport(app=self._manager.app, raise_app_exceptions=False)
        self._client = httpx.AsyncClient(transport=transport, base_url="http://testserver")
        return self._client

    async def __aexit__(self, *exc: object) -> None:
        assert self._client is not None
        await self._client.aclose()
        await self._manager.__aexit__(*exc)


async def register_and_login(
    client: httpx.AsyncClient,
    db: asyncpg.Connection[Any],
    *,
    email: str | None = None,
    password: str = PASSWORD,
    name: str = "Test User",
    org_name: str = "Test Org",
) -> Session:
    """An owner with a verified email, their organisation and its default project (rows through
    the factories, as registration + verification leave them), signed in through the API.
    Registration itself is tested in test_auth.py."""
    email = email or unique_email()
    password_hash = _PASSWORD_HASH if password == PASSWORD else hash_password(password)
    user_id = await make_user(db, email, password_hash=password_hash, display_name=name)
    tenant = await make_tenant(db)
    await db.execute("UPDATE organizations SET name = $2 WHERE id = $1", tenant.org_id, org_name)
    await make_membership(db, tenant.org_id, user_id, "owner")
    r = await login(client, email, password)
    assert r.status_code == 200, r.text
    return session_from(r, user_id=user_id, email=email, org_id=tenant.org_id,
                        project_id=tenant.project_id, client=client)  # fmt: skip


def session_from(
    r: httpx.Response,
    *,
    user_id: uuid.UUID,
    email: str,
    org_id: uuid.UUID,
    project_id: uuid.UUID,
    client: httpx.AsyncClient,
    role: str = "owner",
) -> Session:
    """The session a sign-in answered: the access token (body) and the refresh cookie. The
    client's cookie jar is emptied, so several people can share one client: tests send a
    session's cookie explicitly (`refresh_headers`)."""
    refresh = r.cookies.get(REFRESH_COOKIE)
    assert refresh, f"no {REFRESH_COOKIE} cookie in {r.headers.get_list('set-cookie')}"
    client.cookies.clear()
    body = r.json()
    return Session(
        user_id=user_id,
        email=email,
        org_id=org_id,
        project_id=project_id,
        access_token=body["access_token"],
        refresh_token=refresh,
        csrf_token=body["csrf_token"],
        role=role,
    )


def refresh_headers(session: Session, *, csrf: str | None = None) -> dict[str, str]:
    """What the dashboard sends to /auth/refresh and /auth/logout: the cookie and the header."""
    return {
        "Cookie": f"{REFRESH_COOKIE}={session.refresh_token}",
        CSRF_HEADER: session.csrf_token if csrf is None else csrf,
    }


async def login(client: httpx.AsyncClient, email: str, password: str = PASSWORD) -> httpx.Response:
    return await client.post(f"{API}/auth/login", json={"email": email, "password": password})


@pytest.fixture
async def api_db(database_url: str) -> AsyncIterator[asyncpg.Connection[Any]]:
    """A direct connection to the app's database, for arranging rows and checking effects."""
    from codity.db.pool import connect

    conn = await connect(database_url)
    yield conn
    await conn.close()


@pytest.fixture
async def owner(client: httpx.AsyncClient, api_db: asyncpg.Connection[Any]) -> Session:
    return await register_and_login(client, api_db, org_name="Owner Org")


@pytest.fixture
async def outsider(client: httpx.AsyncClient, api_db: asyncpg.Connection[Any]) -> Session:
    return await register_and_login(client, api_db, org_name="Other Org")


MakeOrgUser = Callable[..., Awaitable[Session]]


@pytest.fixture
def make_org_user(
    client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any]
) -> MakeOrgUser:
    async def make(role: str, *, of: Session | None = None) -> Session:
        base = of or owner
        email = unique_email(role)
        user_id = await make_user(
            api_db, email, password_hash=_PASSWORD_HASH, display_name=f"A {role}"
        )
        await make_membership(api_db, base.org_id, user_id, role)
        r = await login(client, email)
        assert r.status_code == 200, r.text
        return session_from(r, user_id=user_id, email=email, org_id=base.org_id,
                            project_id=base.project_id, client=client, role=role)  # fmt: skip

    return make


MakeApiKey = Callable[..., Awaitable[tuple[str, uuid.UUID]]]


@pytest.fixture
def make_api_key(client: httpx.AsyncClient) -> MakeApiKey:
    async def make(
        session: Session, *, role: str = "member", project_id: uuid.UUID | None = None
    ) -> tuple[str, uuid.UUID]:
        pid = project_id or session.project_id
        r = await client.post(
            f"{API}/projects/{pid}/api-keys",
            json={"name": f"key-{uuid.uuid4().hex[:6]}", "role": role},
            headers=session.headers,
        )
        assert r.status_code == 201, r.text
        body = r.json()
        return body["key"], uuid.UUID(body["id"])

    return make


@dataclass
class Mailbox:
    """What the API sent through the SMTP sink (`codity.cli.smtp_sink`, a real SMTP server)."""

    outbox: Path

    def messages(self, to: str | None = None) -> list[EmailMessage]:
        found = []
        for path in sorted(self.outbox.glob("*.eml")):
            message = BytesParser(policy=policy.default).parsebytes(path.read_bytes())
            assert isinstance(message, EmailMessage)
            if to is None or to in str(message["To"]):
                found.append(message)
        return found

    def last_token(self, to: str) -> str:
        """The token of the link in the last mail to `to`."""
        mails = self.messages(to)
        assert mails, f"no mail to {to} in {self.outbox}"
        body = mails[-1].get_body(("plain",))
        assert body is not None
        match = re.search(r"[?&]token=([^\s&]+)", body.get_content())
        assert match, body.get_content()
        return unquote(match.group(1))


@pytest.fixture
def mailbox(app: FastAPI, api_settings: Settings, tmp_path: Path) -> Iterator[Mailbox]:
    """The app delivers its mail (verification, invitations) to a local SMTP sink."""
    with smtp_sink(tmp_path / "outbox") as url:
        app.state.settings = api_settings.model_copy(update={"smtp_url": url})
        yield Mailbox(tmp_path / "outbox")
