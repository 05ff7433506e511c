"""`codity web`: serve the built dashboard and proxy the API, so the browser sees one origin.

The dashboard (`web/dist`, built by `make web`) is a single-page app: any path that is not a
file answers `index.html` and the client-side router takes it from there. Requests to
`/api/*`, `/healthz` and `/readyz` are streamed to the API unchanged, which keeps the API's
CORS allowlist closed and the session tokens on one origin.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.cookiejar import CookieJar, DefaultCookiePolicy
from pathlib import Path
from typing import Annotated

import httpx
import typer
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from codity.cli._common import console, fail, friendly_errors, settings
from codity.cli.api import GracefulServer

#: Where `npm run build` writes the dashboard, relative to the repository root.
DEFAULT_DIST = Path(__file__).resolve().parents[3] / "web" / "dist"


def dashboard_built(dist: Path = DEFAULT_DIST) -> bool:
    """Whether the dashboard has been built (a checkout after `make web`; never a wheel)."""
    return (dist / "index.html").is_file()


#: Paths forwarded to the API; everything else is the dashboard.
PROXIED_PREFIXES = ("/api/", "/healthz", "/readyz")
#: Headers that describe one hop, not the message; a proxy must not forward them.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
    }
)
#: What a client says about where it is: never passed on. The API trusts forwarding headers
#: only from TRUSTED_PROXIES (this proxy), so a client's own `X-Forwarded-For` would otherwise
#: choose its rate-limit bucket and its audited address.
CLIENT_FORWARDING = frozenset(
    {"forwarded", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port",
     "x-real-ip"}
)  # fmt: skip
#: Sent with every page and asset: the dashboard loads nothing from elsewhere, runs no inline
#: script, and may not be framed. Inline styles are allowed (React's `style` attributes).
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}
#: The API gets this long to answer; long enough for a slow query, short enough to fail visibly.
PROXY_TIMEOUT_S = 30.0


def _forward_headers(
    headers: httpx.Headers | Headers, drop: frozenset[str]
) -> list[tuple[str, str]]:
    """Every header but `drop`, repeated ones kept (the raw list, not a dict)."""
    items = headers.multi_items() if isinstance(headers, httpx.Headers) else headers.items()
    return [(k, v) for k, v in items if k.lower() not in drop]


def create_web_app(
    dist: Path, api_url: str, *, transport: httpx.AsyncBaseTransport | None = None
) -> Starlette:
    """The dashboard server. `transport` lets a test put an in-process API behind the proxy."""
    dist = dist.resolve()
    index = dist / "index.html"

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # One client serves every browser: it must keep no cookies, or a session cookie the API
        # set for one person would ride along on everybody's next request.
        no_cookies = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
        async with httpx.AsyncClient(
            base_url=api_url,
            transport=transport,
            timeout=PROXY_TIMEOUT_S,
            cookies=no_cookies,
        ) as client:
            app.state.client = client
            yield

    async def proxy(request: Request) -> Response:
        client: httpx.AsyncClient = request.app.state.client
        headers = _forward_headers(request.headers, HOP_BY_HOP | CLIENT_FORWARDING)
        peer = request.client.host if request.client else ""
        headers.append(("x-forwarded-for", peer))
        headers.append(("x-forwarded-proto", request.url.scheme))
        upstream = client.build_request(
            request.method,
            request.url.path,
            params=request.url.query,
            headers=headers,
            content=request.stream(),
        )
        try:
            response = await client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            # The envelope the dashboard already understands, instead of a bare 502 page.
            return JSONResponse(
                {
                    "error": {
                        "code": "api_unavailable",
                        "message": f"the API at {api_url} did not answer ({type(exc).__name__})",
                        "details": None,
                        "request_id": "",
                    }
                },
                status_code=502,
            )
        answer = StreamingResponse(
            response.aiter_raw(),
            status_code=response.status_code,
            background=BackgroundTask(response.aclose),
        )
        # Raw header list, not a dict: a sign-in answers two Set-Cookie headers.
        for name, value in _forward_headers(response.headers, HOP_BY_HOP | {"content-length"}):
            answer.headers.append(name, value)
        return answer

    async def static_or_index(request: Request) -> Response:
        if request.url.path.startswith(PROXIED_PREFIXES) or request.url.path in PROXIED_PREFIXES:
            return await proxy(request)
        if request.method not in ("GET", "HEAD"):
            return JSONResponse({"detail": "method not allowed"}, status_code=405)
        relative = request.url.path.lstrip("/")
        candidate = (dist / relative).resolve()
        # Only files inside dist: `..` in a path must never reach the rest of the disk.
        if relative and candidate.is_file() and candidate.is_relative_to(dist):
            immutable = relative.startswith("assets/")  # content-hashed names from Vite
            cache = "public, max-age=31536000, immutable" if immutable else "no-cache"
            return FileResponse(candidate, headers={"cache-control": cache, **SECURITY_HEADERS})
        if relative.startswith("assets/"):
            return Response("not found", status_code=404)  # a stale hashed asset: no HTML
        return FileResponse(index, headers={"cache-control": "no-cache", **SECURITY_HEADERS})

    methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    return Starlette(
        routes=[
            Route("/", static_or_index, methods=methods),
            Route("/{path:path}", static_or_index, methods=methods),
        ],
        lifespan=lifespan,
    )


@friendly_errors
def web(
    port: Annotated[
        int | None, typer.Option(help="Port to listen on (default: WEB_PORT, 5173).")
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    api_url: Annotated[
        str | None,
        typer.Option(
            "--api-url", help="Where the API listens (default: http://API_HOST:API_PORT)."
        ),
    ] = None,
    dist: Annotated[
        Path, typer.Option(help="The built dashboard (npm run build in web/).")
    ] = DEFAULT_DIST,
) -> None:
    """Serve the operator dashboard and proxy /api to the API."""
    import uvicorn

    cfg = settings()
    if not dashboard_built(dist):
        # The wheel does not ship the dashboard (it is built with npm from a checkout).
        fail(
            f"the dashboard is not built: {dist / 'index.html'} is missing "
            "(run `make web` in a checkout of the repository, or pass --dist)"
        )
    upstream = api_url or f"http://{cfg.api_host}:{cfg.api_port}"
    listen = port or cfg.web_port
    console.print(f"dashboard on http://{host}:{listen}  (API: {upstream})", highlight=False)
    config = uvicorn.Config(
        create_web_app(dist, upstream),
        host=host,
        port=listen,
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        server_header=False,
    )
    GracefulServer(config).run()  # SIGTERM: finish the requests in flight, exit 0
