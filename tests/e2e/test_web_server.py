"""`codity web` without a browser: static files, SPA fallback, and the streaming API proxy.

The upstream here is a small in-process ASGI app standing in for the API, so these checks
need neither a database nor a build of the dashboard (a tiny dist is written per test).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from codity.cli.web import create_web_app

INDEX = "<!doctype html><div id=root></div>"


async def _echo(request: Request) -> JSONResponse:
    """What the API received: method, path, query, body and the headers that matter."""
    body = await request.body()
    return JSONResponse(
        {
            "method": request.method,
            "path": request.url.path,
            "query": request.url.query,
            "body": body.decode(),
            "authorization": request.headers.get("authorization"),
            "cookie": request.headers.get("cookie"),
            "forwarded_for": request.headers.getlist("x-forwarded-for"),
            "forwarded": request.headers.getlist("forwarded"),
            "real_ip": request.headers.getlist("x-real-ip"),
            "forwarded_proto": request.headers.getlist("x-forwarded-proto"),
            "forwarded_host": request.headers.getlist("x-forwarded-host"),
        },
        status_code=201 if request.method == "POST" else 200,
        headers={"x-request-id": "abc"},
    )


async def _two_cookies(request: Request) -> JSONResponse:
    answer = JSONResponse({"signed_in": True})
    answer.set_cookie("codity_refresh", "r", httponly=True, path="/api/v1/auth")
    answer.set_cookie("codity_csrf", "c", path="/")
    return answer


UPSTREAM = Starlette(
    routes=[
        Route("/api/v1/auth/login", _two_cookies, methods=["POST"]),
        Route("/{path:path}", _echo, methods=["GET", "POST", "DELETE"]),
    ]
)


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text(INDEX)
    (tmp_path / "assets" / "app-123.js").write_text("console.log(1)")
    (tmp_path.parent / "secret.txt").write_text("outside dist")
    return tmp_path


async def _client(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://web")


def _run(check: Callable[[], Awaitable[None]]) -> None:
    """Run an async check on a loop of its own thread: these tests also run after the
    browser suite, whose Playwright session owns this thread's event loop."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, check()).result()  # type: ignore[arg-type]


def test_pages_whose_address_carries_a_token_send_no_referrer(dist: Path) -> None:
    """The verification and invitation links carry their single-use token in the query
    string: the page must not hand its address to another site in a Referer header, and may
    not be framed. Break it: drop referrer-policy from SECURITY_HEADERS."""

    async def check() -> None:
        app = create_web_app(dist, "http://api", transport=httpx.ASGITransport(app=UPSTREAM))
        async with LifespanManager(app), await _client(app) as web:
            for path in ("/verify-email?token=abc.def.ghi", "/invitations/accept?token=xyz"):
                answer = await web.get(path)
                assert answer.status_code == 200
                assert answer.headers["referrer-policy"] == "no-referrer"
                assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]

    _run(check)


def test_spa_fallback_serves_index_for_client_routes(dist: Path) -> None:
    async def check() -> None:
        app = create_web_app(dist, "http://api", transport=httpx.ASGITransport(app=UPSTREAM))
        async with LifespanManager(app), await _client(app) as web:
            for path in ("/", "/jobs/42", "/dead-letters?x=1"):
                answer = await web.get(path)
                assert answer.status_code == 200
                assert answer.text == INDEX
                assert answer.headers["cache-control"] == "no-cache"
                assert "script-src 'self'" in answer.headers["content-security-policy"]
                assert answer.headers["x-frame-options"] == "DENY"
            asset = await web.get("/assets/app-123.js")
            assert asset.text == "console.log(1)"
            assert "immutable" in asset.headers["cache-control"]
            # A stale hashed asset is a 404, not index.html served as JavaScript.
            assert (await web.get("/assets/gone-456.js")).status_code == 404

    _run(check)


def test_paths_outside_dist_are_never_served(dist: Path) -> None:
    async def check() -> None:
        app = create_web_app(dist, "http://api", transport=httpx.ASGITransport(app=UPSTREAM))
        async with LifespanManager(app), await _client(app) as web:
            for path in ("/../secret.txt", "/%2e%2e/secret.txt", "/assets/../../secret.txt"):
                answer = await web.get(path)
                assert "outside dist" not in answer.text

    _run(check)


def test_api_requests_are_proxied_with_method_query_body_and_headers(dist: Path) -> None:
    async def check() -> None:
        app = create_web_app(dist, "http://api", transport=httpx.ASGITransport(app=UPSTREAM))
        async with LifespanManager(app), await _client(app) as web:
            answer = await web.post(
                "/api/v1/projects/p/jobs?limit=5&status=queued",
                content=json.dumps({"queue": "emails"}),
                headers={"authorization": "Bearer t0k", "content-type": "application/json"},
            )
            assert answer.status_code == 201
            assert answer.headers["x-request-id"] == "abc"
            echoed = answer.json()
            assert echoed["method"] == "POST"
            assert echoed["path"] == "/api/v1/projects/p/jobs"
            assert echoed["query"] == "limit=5&status=queued"
            assert json.loads(echoed["body"]) == {"queue": "emails"}
            assert echoed["authorization"] == "Bearer t0k"
            assert echoed["forwarded_for"]
            for path in ("/healthz", "/readyz"):
                assert (await web.get(path)).json()["path"] == path

    _run(check)


def test_api_down_answers_the_error_envelope(dist: Path) -> None:
    async def check() -> None:
        # Nothing listens on port 9 (discard); the connection is refused at once.
        app = create_web_app(dist, "http://127.0.0.1:9")
        async with LifespanManager(app), await _client(app) as web:
            answer = await web.get("/api/v1/auth/me")
            assert answer.status_code == 502
            assert answer.json()["error"]["code"] == "api_unavailable"

    _run(check)


@pytest.mark.slow
def test_codity_web_stops_cleanly_on_sigterm(dist: Path) -> None:
    """`codity up` stops its children with SIGTERM and reads their exit status."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "codity.cli", "web", "--port", str(port), "--dist", str(dist)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=1).text == INDEX:
                    break
            time.sleep(0.2)
        else:
            pytest.fail("codity web did not start")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


def test_codity_web_refuses_to_start_without_a_build(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "codity.cli", "web", "--dist", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "not built" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_proxy_replaces_a_clients_own_forwarding_headers(dist: Path) -> None:
    """The API believes X-Forwarded-For from this proxy (TRUSTED_PROXIES): a client must not be
    able to choose the address the API sees (its rate-limit bucket, its audit address), nor
    the scheme or host. Break it: forward the incoming headers again (or drop one name from
    CLIENT_FORWARDING) and the forged value reaches the API."""

    async def check() -> None:
        app = create_web_app(dist, "http://api", transport=httpx.ASGITransport(app=UPSTREAM))
        transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 5555))
        async with (
            LifespanManager(app),
            httpx.AsyncClient(transport=transport, base_url="http://web") as web,
        ):
            forged = {
                "x-forwarded-for": "6.6.6.6",
                "forwarded": "for=6.6.6.6",
                "x-real-ip": "6.6.6.6",
                "x-forwarded-proto": "https",
                "x-forwarded-host": "evil.example",
            }
            echoed = (await web.get("/api/v1/anything", headers=forged)).json()
            assert echoed["forwarded_for"] == ["203.0.113.9"]
            assert echoed["forwarded"] == []
            assert echoed["real_ip"] == []
            # The scheme is the one the client used here (it decides the cookies' Secure flag).
            assert echoed["forwarded_proto"] == ["http"]
            assert echoed["forwarded_host"] == []

    _run(check)


def test_every_set_cookie_of_the_api_reaches_the_browser(dist: Path) -> None:
    async def check() -> None:
        app = create_web_app(dist, "http://api", transport=httpx.ASGITransport(app=UPSTREAM))
        async with LifespanManager(app), await _client(app) as web:
            answer = await web.post("/api/v1/auth/login")
            cookies = answer.headers.get_list("set-cookie")
            assert sorted(c.split("=", 1)[0] for c in cookies) == ["codity_csrf", "codity_refresh"]

    _run(check)


def test_one_browsers_cookies_never_reach_another_browsers_requests(dist: Path) -> None:
    """The proxy is one HTTP client for every browser: it must not keep the cookies the API
    sets, or one person's session cookie would be sent with everybody's requests. (Found when
    sessions moved to cookies: the CSRF check refused the borrowed session.) Break it: drop the
    cookie policy from the proxy's client and the second browser's request carries the first
    browser's refresh cookie."""

    async def check() -> None:
        app = create_web_app(dist, "http://api", transport=httpx.ASGITransport(app=UPSTREAM))
        async with LifespanManager(app), await _client(app) as first, await _client(app) as second:
            signed_in = await first.post("/api/v1/auth/login")
            assert signed_in.cookies.get("codity_refresh") == "r"
            echoed = (await second.get("/api/v1/auth/anything")).json()
            assert echoed["cookie"] is None
            # And a browser's own cookies still go through.
            mine = (await second.get("/api/v1/x", headers={"cookie": "codity_csrf=c"})).json()
            assert mine["cookie"] == "codity_csrf=c"

    _run(check)
