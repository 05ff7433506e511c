"""The HTTP edge: error envelope for bad input, body limit, request ids, security headers, CORS,
docs without a CDN, health/readiness, and API keys (own project only, revocable, hashed)."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Any

import asyncpg
import httpx
import jwt
from structlog.testing import capture_logs
from tests.api.conftest import API, MakeApiKey, Session, app_client, register_and_login

from codity.api.app import create_app
from codity.api.routing import Route, Scope
from codity.settings import Settings

# --- bad input answers the envelope ------------------------------------------------------


def assert_envelope(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code
    assert error["message"]
    assert error["request_id"] == r.headers["X-Request-ID"]
    assert "Traceback" not in r.text
    return error


async def test_malformed_json_is_422_envelope(client: httpx.AsyncClient, owner: Session) -> None:
    r = await client.post(
        f"{API}/projects",
        content=b'{"name": "x",',
        headers={**owner.headers, "Content-Type": "application/json"},
    )
    error = assert_envelope(r, 422, "validation_error")
    assert error["details"][0]["type"] == "json_invalid"


async def test_wrong_type_and_unknown_field_report_field_paths(
    client: httpx.AsyncClient, owner: Session
) -> None:
    r = await client.post(
        f"{API}/projects/{owner.project_id}/api-keys",
        json={"name": 5, "role": "superuser", "bogus": True},
        headers=owner.headers,
    )
    error = assert_envelope(r, 422, "validation_error")
    by_loc = {tuple(d["loc"]): d["type"] for d in error["details"]}
    assert by_loc[("body", "name")] == "string_type"
    assert by_loc[("body", "role")] == "enum"
    assert by_loc[("body", "bogus")] == "extra_forbidden"


async def test_bad_path_id_and_unknown_ids(client: httpx.AsyncClient, owner: Session) -> None:
    r = await client.get(f"{API}/projects/not-a-uuid", headers=owner.headers)
    error = assert_envelope(r, 422, "validation_error")
    assert error["details"][0]["loc"] == ["path", "project_id"]
    r = await client.get(f"{API}/projects/{uuid.uuid4()}", headers=owner.headers)
    assert_envelope(r, 404, "project_not_found")
    r = await client.delete(
        f"{API}/projects/{owner.project_id}/api-keys/{uuid.uuid4()}", headers=owner.headers
    )
    assert_envelope(r, 404, "api_key_not_found")
    r = await client.get(f"{API}/no/such/route", headers=owner.headers)
    assert_envelope(r, 404, "not_found")
    r = await client.put(f"{API}/org", headers=owner.headers)
    assert_envelope(r, 405, "method_not_allowed")


async def test_oversized_body_is_413_envelope(
    client: httpx.AsyncClient, owner: Session, api_settings: Settings
) -> None:
    too_big = b'{"name": "' + b"x" * api_settings.max_request_body_bytes + b'"}'
    r = await client.post(
        f"{API}/projects",
        content=too_big,
        headers={**owner.headers, "Content-Type": "application/json"},
    )
    assert_envelope(r, 413, "payload_too_large")

    async def chunks():  # type: ignore[no-untyped-def]
        # Streamed without Content-Length: counted while read.
        yield b'{"name": "'
        for _ in range(api_settings.max_request_body_bytes // 65536 + 1):
            yield b"x" * 65536
        yield b'"}'

    r = await client.post(
        f"{API}/projects",
        content=chunks(),
        headers={**owner.headers, "Content-Type": "application/json"},
    )
    assert_envelope(r, 413, "payload_too_large")


async def test_unhandled_error_is_500_envelope_without_trace(api_settings: Settings) -> None:
    async def explode() -> None:
        raise RuntimeError("secret internals")

    app = create_app(
        api_settings, routes=[Route("GET", "/explode", explode, Scope.PUBLIC, None, "x")]
    )
    async with app_client(app) as client:
        with capture_logs() as logs:
            r = await client.get(f"{API}/explode", headers={"X-Request-ID": "trace-me-123"})
    error = assert_envelope(r, 500, "internal_error")
    assert error["request_id"] == "trace-me-123"
    assert "secret internals" not in r.text
    # The server side keeps the detail, findable by the request id the client was given.
    (logged,) = [e for e in logs if e["event"] == "unhandled_error"]
    assert logged["log_level"] == "error"
    assert logged["exc_info"] is True
    (access,) = [e for e in logs if e["event"] == "request"]
    assert (access["request_id"], access["status"]) == ("trace-me-123", 500)


# --- request ids, headers, CORS, docs -----------------------------------------------------


async def test_request_id_is_echoed_or_generated(client: httpx.AsyncClient) -> None:
    r = await client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert r.headers["X-Request-ID"] == "abc-123"
    r = await client.get("/healthz", headers={"X-Request-ID": "bad id\nwith newline"})
    assert r.headers["X-Request-ID"] != "bad id\nwith newline"
    assert len(r.headers["X-Request-ID"]) == 32


async def test_security_headers(client: httpx.AsyncClient) -> None:
    r = await client.get("/healthz")
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["Referrer-Policy"] == "no-referrer"
    assert "default-src 'none'" in r.headers["Content-Security-Policy"]


async def test_docs_are_served_with_local_assets(client: httpx.AsyncClient) -> None:
    page = await client.get(f"{API}/docs")
    assert page.status_code == 200
    assert "cdn" not in page.text.lower()
    assert "http://" not in page.text
    assert "https://" not in page.text  # nothing loaded from elsewhere
    assert f"{API}/docs/static/swagger-ui-bundle.js" in page.text
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    js = await client.get(f"{API}/docs/static/swagger-ui-bundle.js")
    assert js.status_code == 200
    assert len(js.content) > 100_000
    spec = await client.get(f"{API}/openapi.json")
    assert spec.status_code == 200
    assert spec.json()["components"]["securitySchemes"]


async def test_cors_allowlist(client: httpx.AsyncClient, api_settings: Settings) -> None:
    allowed = api_settings.cors_origin_list[0]
    preflight = {"Access-Control-Request-Method": "POST"}
    r = await client.options(f"{API}/auth/login", headers={"Origin": allowed, **preflight})
    assert r.headers["Access-Control-Allow-Origin"] == allowed
    r = await client.options(
        f"{API}/auth/login", headers={"Origin": "https://evil.example", **preflight}
    )
    assert "Access-Control-Allow-Origin" not in r.headers
    assert_envelope(r, 400, "cors_rejected")


# --- health ------------------------------------------------------------------------------


async def test_health_and_readiness(
    client: httpx.AsyncClient, api_db: asyncpg.Connection[Any]
) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["status"] == "ready"
    await api_db.execute("UPDATE alembic_version SET version_num = 'older'")
    behind = await client.get("/readyz")
    assert_envelope(behind, 503, "migrations_pending")


async def test_readiness_when_the_database_is_gone(api_settings: Settings) -> None:
    app = create_app(api_settings)
    async with app_client(app) as client:
        await app.state.pool.close()
        r = await client.get("/readyz")
    assert_envelope(r, 503, "database_unavailable")


# --- tokens --------------------------------------------------------------------------------


async def test_unsigned_and_expired_tokens_are_refused(
    client: httpx.AsyncClient, owner: Session, api_settings: Settings
) -> None:
    claims = jwt.decode(owner.access_token, options={"verify_signature": False})
    unsigned = jwt.encode(claims, key="", algorithm="none")
    expired = jwt.encode(
        {**claims, "exp": claims["iat"] - 1}, api_settings.jwt_secret, algorithm="HS256"
    )
    for token in (unsigned, expired):
        r = await client.get(f"{API}/auth/me", headers={"Authorization": f"Bearer {token}"})
        assert_envelope(r, 401, "unauthorized")


async def test_a_removed_member_loses_access_at_once(
    client: httpx.AsyncClient, owner: Session, make_org_user: Any
) -> None:
    member = await make_org_user("member")
    assert (await client.get(f"{API}/org", headers=member.headers)).status_code == 200
    r = await client.delete(f"{API}/org/members/{member.user_id}", headers=owner.headers)
    assert r.status_code == 204
    # The access token has not expired, but the membership is gone: refused on the next call.
    assert_envelope(await client.get(f"{API}/org", headers=member.headers), 401, "unauthorized")


# --- API keys ------------------------------------------------------------------------------


async def test_api_key_enqueues_in_its_project_and_sees_nothing_else(
    client: httpx.AsyncClient,
    owner: Session,
    outsider: Session,
    make_api_key: MakeApiKey,
    api_db: asyncpg.Connection[Any],
) -> None:
    from tests.factories import make_queue

    key, key_id = await make_api_key(owner, role="member")
    headers = {"Authorization": f"Bearer {key}"}
    queue_id = await make_queue(api_db, owner.project_id, name="emails")
    r = await client.post(
        f"{API}/projects/{owner.project_id}/jobs",
        json={"queue": "emails", "handler": "noop"},
        headers=headers,
    )
    assert r.status_code == 201, r.text
    assert await api_db.fetchval("SELECT count(*) FROM jobs WHERE queue_id = $1", queue_id) == 1

    # Another project of the SAME org, and a project of another org: both 404, nothing stored.
    sibling = await client.post(f"{API}/projects", json={"name": "Sibling"}, headers=owner.headers)
    sibling_id = sibling.json()["id"]
    sibling_queue = await make_queue(api_db, uuid.UUID(sibling_id), name="emails")
    for project_id, queue in ((sibling_id, sibling_queue), (outsider.project_id, None)):
        r = await client.get(f"{API}/projects/{project_id}/queues", headers=headers)
        assert_envelope(r, 404, "project_not_found")
        r = await client.post(
            f"{API}/projects/{project_id}/jobs",
            json={"queue": "emails", "handler": "noop"},
            headers=headers,
        )
        assert_envelope(r, 404, "project_not_found")
    assert (
        await api_db.fetchval("SELECT count(*) FROM jobs WHERE queue_id = $1", sibling_queue) == 0
    )

    # Org-level routes act for a person; a key is confined to its project.
    assert_envelope(await client.get(f"{API}/org/members", headers=headers), 403, "forbidden")
    # Its role is enforced like a member's: no queue creation (admin).
    r = await client.post(
        f"{API}/projects/{owner.project_id}/queues", json={"name": "x"}, headers=headers
    )
    assert_envelope(r, 403, "forbidden")
    # Use is recorded, at most once a minute (no row rewrite on every request).
    used = await api_db.fetchval("SELECT last_used_at FROM api_keys WHERE id = $1", key_id)
    assert used is not None
    assert (
        await client.get(f"{API}/projects/{owner.project_id}/queues", headers=headers)
    ).status_code == 200
    assert await api_db.fetchval("SELECT last_used_at FROM api_keys WHERE id = $1", key_id) == used

    # Expired: 401 while expired.
    await api_db.execute(
        "UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1", key_id
    )
    r = await client.get(f"{API}/projects/{owner.project_id}/queues", headers=headers)
    assert_envelope(r, 401, "unauthorized")
    await api_db.execute(
        "UPDATE api_keys SET expires_at = now() + interval '1 day' WHERE id = $1", key_id
    )

    # Revoked: 401 from then on.
    r = await client.delete(
        f"{API}/projects/{owner.project_id}/api-keys/{key_id}", headers=owner.headers
    )
    assert r.status_code == 204
    r = await client.get(f"{API}/projects/{owner.project_id}/queues", headers=headers)
    assert_envelope(r, 401, "unauthorized")


async def test_api_keys_are_shown_once_and_stored_hashed(
    client: httpx.AsyncClient,
    owner: Session,
    make_api_key: MakeApiKey,
    api_db: asyncpg.Connection[Any],
) -> None:
    key, key_id = await make_api_key(owner, role="viewer")
    assert key.startswith("cdy_")
    assert len(key) >= 4 + 43  # 32 random bytes in base64url
    stored = await api_db.fetchrow("SELECT key_hash, prefix FROM api_keys WHERE id = $1", key_id)
    assert stored["key_hash"] == hashlib.sha256(key.encode()).digest()
    assert key not in str(await api_db.fetch("SELECT * FROM api_keys"))
    listed = await client.get(f"{API}/projects/{owner.project_id}/api-keys", headers=owner.headers)
    assert key not in listed.text
    assert listed.json()["items"][0]["prefix"] == stored["prefix"]


async def test_api_key_role_cannot_exceed_its_creator(
    client: httpx.AsyncClient, owner: Session, make_org_user: Any
) -> None:
    admin = await make_org_user("admin")
    r = await client.post(
        f"{API}/projects/{owner.project_id}/api-keys",
        json={"name": "k", "role": "owner"},
        headers=admin.headers,
    )
    assert_envelope(r, 403, "forbidden")


async def test_keys_cannot_mint_keys(
    client: httpx.AsyncClient, owner: Session, make_api_key: MakeApiKey
) -> None:
    key, _ = await make_api_key(owner, role="admin")
    r = await client.post(
        f"{API}/projects/{owner.project_id}/api-keys",
        json={"name": "child", "role": "viewer"},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert_envelope(r, 403, "forbidden")


async def test_second_org_user_helper_is_isolated(
    client: httpx.AsyncClient, api_db: asyncpg.Connection[Any]
) -> None:
    a = await register_and_login(client, api_db, org_name="A")
    b = await register_and_login(client, api_db, org_name="B")
    assert a.org_id != b.org_id
    r = await client.get(f"{API}/projects/{a.project_id}", headers=b.headers)
    assert_envelope(r, 404, "project_not_found")


async def test_connections_killed_between_requests_are_replaced(
    client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any]
) -> None:
    killed = await api_db.fetchval(
        """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE application_name = 'codity-api' AND datname = current_database()"""
    )
    assert killed >= 1
    await asyncio.sleep(0.2)  # termination is a signal: let the backends exit
    r = await client.get(f"{API}/org", headers=owner.headers)
    assert r.status_code == 200


async def test_losing_the_database_mid_request_answers_503(api_settings: Settings) -> None:
    async def mid_request_failure() -> None:
        raise asyncpg.exceptions.AdminShutdownError(
            "terminating connection due to administrator command"
        )

    async def reset() -> None:
        raise ConnectionResetError("connection reset by peer")

    routes = [
        Route("GET", "/shutdown", mid_request_failure, Scope.PUBLIC, None, "x"),
        Route("GET", "/reset", reset, Scope.PUBLIC, None, "y"),
    ]
    async with app_client(create_app(api_settings, routes=routes)) as client:
        for path in ("/shutdown", "/reset"):
            r = await client.get(f"{API}{path}")
            assert_envelope(r, 503, "database_unavailable")
            assert r.headers["Retry-After"] == "1"
