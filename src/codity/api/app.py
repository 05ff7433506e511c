"""The application factory: `create_app()` builds the FastAPI app from the route table.

Everything under /api/v1 comes from `routes.ALL_ROUTES` through `routing.mount_routes`; the
OpenAPI document is at /api/v1/openapi.json and Swagger UI at /api/v1/docs. `/healthz`,
`/readyz` and `/metrics` live outside /api/v1.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI

from codity import tracing
from codity.api import docs, health, metrics, ratelimit
from codity.api.bulk_runner import BulkActionRunner
from codity.api.cookies import CSRF_HEADER
from codity.api.errors import install_error_handlers
from codity.api.events import EventHub
from codity.api.middleware import (
    BodySizeLimitMiddleware,
    EnvelopeCORSMiddleware,
    RequestContextMiddleware,
    SecurityHeadersMiddleware,
)
from codity.api.routing import API_PREFIX, Route, mount_routes
from codity.db.migrate import head_revision
from codity.db.pool import create_pool
from codity.domain.errors import ConfigurationError
from codity.settings import Settings, get_settings

API_TITLE = "Codity Scheduler API"
API_VERSION = "1.0.0"
#: Connections per API process; requests hold one only for the statements they run.
POOL_MAX_SIZE = 10


def api_server_settings(settings: Settings) -> dict[str, str]:
    """Run-time parameters of the API's connections. Its statements are short OLTP reads and
    writes: `statement_timeout` bounds a search that went wrong, and JIT is off because its
    compile time (~190 ms, seen on the throughput chart whose generate_series the planner
    over-estimates) is never repaid by a query this small. Behind a transaction pooler
    (DATABASE_DIRECT_URL set) startup parameters are not carried to the server -- PgBouncer
    refuses unknown ones -- so none are sent; set them on the API's role there (RUNBOOK), the
    client's deadline still holds."""
    if settings.database_direct_url:
        return {}
    return {"statement_timeout": str(settings.api_statement_timeout_ms), "jit": "off"}


def create_app(
    settings: Settings | None = None,
    *,
    routes: Sequence[Route] | None = None,
    _guard: bool = True,
) -> FastAPI:
    """Build the app. `routes` defaults to ALL_ROUTES; `_guard=False` is for one test only
    (it proves the isolation test detects a missing tenancy guard)."""
    settings = settings or get_settings()
    if routes is None:
        from codity.api.routes import ALL_ROUTES

        routes = ALL_ROUTES

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Read from app.state at startup (not the closure): tests build the app once and point
        # it at each test's own database before starting it.
        current: Settings = app.state.settings
        if not current.database_url:
            raise ConfigurationError("DATABASE_URL is not set")
        app.state.pool = await create_pool(
            current.database_url,
            max_size=POOL_MAX_SIZE,
            application_name="codity-api",
            server_settings=api_server_settings(current),
            command_timeout_s=current.api_statement_timeout_ms / 1000 + 1,
        )
        pruner_stop = asyncio.Event()
        pruner = asyncio.create_task(ratelimit.WindowPruner(app.state.pool).run(pruner_stop))
        # One LISTEN connection for the whole process, fanned out to every browser. LISTEN
        # needs a session: DATABASE_DIRECT_URL when DATABASE_URL goes through a transaction
        # pooler (PgBouncer), as the worker's notifier does.
        listen_url = current.database_direct_url or current.database_url
        app.state.events = EventHub(listen_url, app.state.pool)
        await app.state.events.start()
        app.state.metrics_cache = metrics.SnapshotCache()  # a new app run starts a new snapshot
        # Bulk actions run here, in the API process, one chunk per transaction (bulk_runner).
        app.state.bulk_wake = asyncio.Event()
        bulk_stop = asyncio.Event()
        bulk = BulkActionRunner(app.state.pool, current, wake=app.state.bulk_wake)
        bulk_task = asyncio.create_task(bulk.run(bulk_stop))
        try:
            async with metrics.private_listener(app.state):
                yield
        finally:
            # Stop between chunks (a chunk in flight commits or rolls back whole either way).
            bulk_stop.set()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(bulk_task, timeout=5)
            await app.state.events.stop()
            pruner_stop.set()  # between rounds; a round in flight is one DELETE
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(pruner, timeout=5)
            await app.state.pool.close()

    app = FastAPI(
        title=API_TITLE,
        version=API_VERSION,
        description="REST API of Codity Scheduler. Every error answers one envelope: "
        '`{"error": {"code", "message", "details", "request_id"}}`.',
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=None,  # served by docs.py with local assets (no CDN)
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.migration_head = head_revision()

    install_error_handlers(app)
    mount_routes(app, routes, _guard=_guard)
    app.include_router(health.router)
    docs.mount_docs(app, f"{API_PREFIX}/docs")
    app.include_router(metrics.router)

    # Added innermost first: the last one added is the outermost.
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_request_body_bytes)
    app.add_middleware(
        EnvelopeCORSMiddleware,
        allow_origins=settings.cors_origin_list,
        allow_credentials=False,
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        allow_headers=[
            "Authorization",
            "Content-Type",
            "Idempotency-Key",
            "X-Request-ID",
            CSRF_HEADER,
        ],
        expose_headers=["X-Request-ID", "Retry-After"],
        max_age=600,
    )
    app.add_middleware(SecurityHeadersMiddleware, docs_paths=(f"{API_PREFIX}/docs",))
    app.add_middleware(RequestContextMiddleware, state=app.state)
    # Outermost: every request is a span (codity[otel]); an enqueue inside it stores its
    # traceparent, so the worker's span for the job links back to the request.
    otel_middleware = tracing.asgi_middleware()
    if otel_middleware is not None:
        app.add_middleware(otel_middleware, excluded_urls="healthz,readyz,metrics")
    return app


def app_factory() -> FastAPI:
    """For `uvicorn --factory codity.api.app:app_factory` (what `codity api` runs)."""
    return create_app()
