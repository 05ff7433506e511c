"""`http_request` against local test servers on 127.0.0.1 (allowlisted where the test needs it).

No traffic ever goes to a non-loopback address: the blocked destinations in these tests are
refused by the guard before any connection is attempted.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from codity.worker.handlers.http_request import (
    MAX_BODY_IN_RESULT,
    MAX_REDIRECTS,
    HttpRequestSpec,
    HttpStatusError,
    perform,
)
from codity.worker.handlers.ssrf import DestinationRefusedError, SsrfGuard

#: How long /slow takes to answer: far past the 0.3 s timeout of the test that calls it, so
#: a timeout that did not fire shows whatever the machine's load.
SLOW_S = 10.0


@dataclass
class Server:
    port: int
    hits: list[str] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    state = Server(port=0)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._route()

        def do_POST(self) -> None:
            self._route()

        def _route(self) -> None:
            parts = urlsplit(self.path)
            state.hits.append(parts.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            if parts.path == "/ok":
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                echo = {"method": self.command, "host": self.headers["Host"], "body": body}
                self._send(200, json.dumps(echo).encode(), {"Content-Type": "application/json"})
            elif parts.path == "/fail":
                self._send(503, b"service unavailable")
            elif parts.path == "/slow":
                time.sleep(SLOW_S)
                self._send(200, b"late")
            elif parts.path == "/redirect":
                self._send(302, b"", {"Location": query["to"]})
            elif parts.path == "/loop":
                self._send(302, b"", {"Location": "/loop"})
            elif parts.path == "/big":
                self._send(200, b"x" * (MAX_BODY_IN_RESULT * 4))
            else:
                self._send(404, b"not found")

    class QuietServer(ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # the timeout test hangs up on /slow; its late write fails, as intended

    httpd = QuietServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


def loopback(server: Server) -> SsrfGuard:
    """The test server: an allowlisted host (loopback) on a port allowed for the test."""
    return SsrfGuard(allowlist=["127.0.0.1"], allowed_ports=[server.port])


def spec(url: str, **kw: object) -> HttpRequestSpec:
    return HttpRequestSpec.from_payload({"url": url, **kw})


async def test_success_returns_status_headers_and_body(server: Server) -> None:
    result = await perform(spec(server.url("/ok"), method="POST", json={"a": 1}), loopback(server))
    assert result["status"] == 200
    assert result["headers"]["content-type"] == "application/json"
    echoed = json.loads(result["body"])
    assert echoed == {"method": "POST", "host": f"127.0.0.1:{server.port}", "body": '{"a": 1}'}
    assert result["redirects"] == 0


async def test_non_2xx_fails_the_attempt(server: Server) -> None:
    with pytest.raises(HttpStatusError, match="returned HTTP 503: service unavailable"):
        await perform(spec(server.url("/fail")), loopback(server))


async def test_timeout(server: Server) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"timed out after 0\.3 s"):
        await perform(spec(server.url("/slow"), timeout=0.3), loopback(server))
    assert time.monotonic() - started < SLOW_S  # did not wait for the slow answer


async def test_loopback_is_refused_unless_allowlisted_and_nothing_is_sent(server: Server) -> None:
    before = len(server.hits)
    for host in ("127.0.0.1", "localhost"):
        with pytest.raises(DestinationRefusedError, match="loopback"):
            await perform(
                spec(server.url("/ok", host=host)), SsrfGuard(allowed_ports=[server.port])
            )
    assert len(server.hits) == before


async def test_redirects_are_followed_and_each_hop_is_rechecked(server: Server) -> None:
    ok = await perform(spec(server.url("/redirect?to=/ok")), loopback(server))
    assert (ok["status"], ok["redirects"]) == (200, 1)
    for target in (
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::ffff:127.0.0.1]/",
        f"http://localhost:{server.port}/ok",  # loopback by another name: not on the allowlist
    ):
        before = list(server.hits)
        with pytest.raises(DestinationRefusedError, match="refused"):
            await perform(spec(server.url(f"/redirect?to={target}")), loopback(server))
        assert server.hits[len(before) :] == ["/redirect"]  # the blocked hop was never requested


async def test_redirect_chains_are_capped(server: Server) -> None:
    before = len(server.hits)
    with pytest.raises(DestinationRefusedError, match=f"more than {MAX_REDIRECTS} redirects"):
        await perform(spec(server.url("/loop")), loopback(server))
    assert len(server.hits) - before == MAX_REDIRECTS + 1


async def test_the_body_kept_in_the_result_is_bounded(server: Server) -> None:
    result = await perform(spec(server.url("/big")), loopback(server))
    assert len(result["body"]) == MAX_BODY_IN_RESULT
    assert result["body_truncated"] is True
    assert result["body_bytes"] == MAX_BODY_IN_RESULT * 4


async def test_connection_goes_to_the_checked_address_with_the_original_host_header(
    server: Server,
) -> None:
    """No DNS rebinding: the name is resolved once (by the guard) and the request goes to that
    address. The system resolver knows nothing of `pinned.test`, so this only works if the
    connection really uses the checked address."""

    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"] if host == "pinned.test" else []

    guard = SsrfGuard(allowlist=["pinned.test"], resolver=resolver, allowed_ports=[server.port])
    result = await perform(spec(f"http://pinned.test:{server.port}/ok"), guard)
    assert json.loads(result["body"])["host"] == f"pinned.test:{server.port}"


def test_payload_validation() -> None:
    from codity.worker.handlers.basic import HandlerInputError

    for bad in (
        {},
        {"url": 5},
        {"url": "http://x", "method": "BREW"},
        {"url": "http://x", "timeout": -1},
        "nope",
    ):
        with pytest.raises(HandlerInputError):
            HttpRequestSpec.from_payload(bad)


async def test_the_allowlist_is_per_project_within_the_deployments(
    server: Server, monkeypatch: pytest.MonkeyPatch, pool: Any
) -> None:
    """Low: a host counts only when the job's project AND the deployment (HTTP_HANDLER_ALLOWLIST)
    name it, so an organisation's admin cannot open internal addresses to their own jobs, and
    one project's allowlist does not open them to another project. Break it: build the guard
    from settings.allowlist_hosts alone."""
    import threading
    import uuid

    from tests.factories import make_project, make_queue, make_tenant

    from codity import core
    from codity.settings import get_settings
    from codity.worker.context import JobContext
    from codity.worker.handlers.http_request import http_request
    from codity.worker.job_logger import JobLogger

    tenant = await make_tenant(pool)
    allowed = await make_queue(pool, tenant.project_id)
    other = await make_queue(pool, await make_project(pool, tenant.org_id))
    await pool.execute(
        "UPDATE projects SET http_allowlist = '{127.0.0.1}' WHERE id = $1", tenant.project_id
    )
    fence = core.Fence(job_id=1, worker_id=uuid.uuid4(), execution_seq=1)

    def ctx(queue_id: uuid.UUID) -> JobContext:
        return JobContext(
            job_id=1, queue_id=queue_id, handler="http_request",
            payload={"url": server.url("/ok"), "headers": {"Authorization": "Bearer s3cret"}},
            attempt=1, max_attempts=3, execution_seq=1, deadline=None,
            logger=JobLogger(fence), cancelled=threading.Event(), db=pool, _fence=fence,
        )  # fmt: skip

    monkeypatch.setenv("HTTP_HANDLER_ALLOWED_PORTS", str(server.port))
    monkeypatch.delenv("HTTP_HANDLER_ALLOWLIST", raising=False)
    get_settings.cache_clear()
    try:
        with pytest.raises(DestinationRefusedError):  # the project alone cannot allow it
            await http_request(ctx(allowed))
        monkeypatch.setenv("HTTP_HANDLER_ALLOWLIST", "example.org, 127.0.0.1")
        get_settings.cache_clear()
        with pytest.raises(DestinationRefusedError):  # nor the deployment alone
            await http_request(ctx(other))
        context = ctx(allowed)
        result = await http_request(context)  # both name it
    finally:
        get_settings.cache_clear()
    assert result["status"] == 200
    logged = context.logger._take(final=False)
    assert [e.message for e in logged] == ["http request", "http response"]
    assert "s3cret" not in repr(logged)  # headers are not logged at all


async def test_credentials_and_query_strings_never_reach_errors_or_results(
    server: Server,
) -> None:
    """Low: job errors and results are stored and shown; a URL's userinfo and query string
    (where tokens travel) are dropped from them. Break it: use str(dest.url) again."""
    guard = loopback(server)
    secret_url = server.url("/fail").replace("http://", "http://user:hunter2@") + "?token=abc"
    with pytest.raises(HttpStatusError) as failed:
        await perform(spec(secret_url), guard)
    assert "hunter2" not in str(failed.value)
    assert "token=abc" not in str(failed.value)
    assert f"127.0.0.1:{server.port}/fail" in str(failed.value)
    result = await perform(spec(server.url("/ok") + "?api_key=xyz"), guard)
    assert result["url"] == server.url("/ok")
