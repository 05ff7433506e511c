"""`/metrics` in Prometheus text format, derived from the database.

The API process runs no job, so in-process counters would stay at zero. Instead a custom
collector reads the numbers from PostgreSQL (a handful of grouped counts, at most once per
METRICS_SNAPSHOT_S, see below):

- `codity_queue_depth{queue,status}`       gauge: jobs per status right now
- `codity_queue_paused{queue}`             gauge: 1 while paused
- `codity_workers{status}`                 gauge: registered workers per status
- `codity_jobs_started_total{queue}`       attempts that reached a handler
- `codity_jobs_completed_total{queue}`     attempts that completed
- `codity_jobs_failed_total{queue}`        attempts that failed or timed out
- `codity_jobs_dead_lettered_total{queue}` jobs moved to the dead-letter queue
- `codity_lease_expiries_total{queue}`     attempts lost to an expired lease (reaper)
- `codity_job_claim_to_start_seconds`      histogram: claimed_at -> started_at per attempt
- `codity_job_run_seconds`                 histogram: started_at -> finished_at per attempt

Counters and histograms count the execution rows still retained: pruning old history makes
them drop, which Prometheus handles as a counter reset.

Access and cost (the endpoint names every tenant's queues and runs whole-table aggregates):
- On the API's own port, `/metrics` answers only `Authorization: Bearer <METRICS_TOKEN>`
  (401 otherwise, and always 401 when METRICS_TOKEN is unset).
- With METRICS_BIND (`host:port`), a second listener serves `/metrics` without a token, for a
  scraper on a private network; nothing else is served there.
- The numbers are a snapshot taken at most every METRICS_SNAPSHOT_S seconds: scrapes in between
  (from any number of scrapers) get the same body, and concurrent scrapes of a stale snapshot
  wait for the one refresh instead of each querying the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import math
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import uvicorn
from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from starlette.applications import Starlette
from starlette.routing import Route

from codity.api.errors import error_response
from codity.core import Conn
from codity.db.queries import bind
from codity.domain.errors import ConfigurationError
from codity.domain.states import JobStatus, WorkerStatus
from codity.settings import Settings

#: Upper bounds (seconds) of the duration histograms: from a fast no-op to a long report.
DURATION_BUCKETS_S: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip


@dataclass
class Histogram:
    """Cumulative bucket counts (Prometheus `le` semantics), their sum and count."""

    buckets: list[tuple[str, float]] = field(default_factory=list)
    total: float = 0.0


@dataclass
class Snapshot:
    queue_names: dict[UUID, str]
    depth: list[tuple[UUID, str, int]]
    paused: dict[UUID, bool]
    workers: dict[str, int]
    executions: dict[UUID, dict[str, int]]
    dead_lettered: dict[UUID, int]
    claim_to_start: Histogram
    run: Histogram


async def _histogram(conn: Conn, statement: str) -> Histogram:
    rows = await bind(statement, bounds=list(DURATION_BUCKETS_S)).fetch(conn)
    per_bucket = {r["bucket"]: r["n"] for r in rows}
    cumulated: list[tuple[str, float]] = []
    running = 0
    for i, bound in enumerate(DURATION_BUCKETS_S):
        running += per_bucket.get(i, 0)  # samples below bound i (index i = i bounds under it)
        cumulated.append((repr(bound), float(running)))
    running += per_bucket.get(len(DURATION_BUCKETS_S), 0)
    cumulated.append(("+Inf", float(running)))
    return Histogram(buckets=cumulated, total=float(sum(r["total"] for r in rows)))


async def take_snapshot(conn: Conn) -> Snapshot:
    queues = await bind("api_metrics_queues").fetch(conn)
    executions: dict[UUID, dict[str, int]] = {}
    for r in await bind("api_metrics_executions").fetch(conn):
        executions[r["queue_id"]] = {k: r[k] for k in ("started", "completed", "failed", "lost")}
    for r in await bind("api_metrics_running").fetch(conn):
        counts = executions.setdefault(
            r["queue_id"], {"started": 0, "completed": 0, "failed": 0, "lost": 0}
        )
        counts["started"] += r["n"]
    return Snapshot(
        queue_names={r["id"]: r["name"] for r in queues},
        depth=[
            (r["queue_id"], r["status"], r["n"])
            for r in await bind("api_metrics_depth").fetch(conn)
        ],
        paused={r["id"]: r["is_paused"] for r in queues},
        workers={r["status"]: r["n"] for r in await bind("api_metrics_workers").fetch(conn)},
        executions=executions,
        dead_lettered={
            r["queue_id"]: r["n"] for r in await bind("api_metrics_dead_lettered").fetch(conn)
        },
        claim_to_start=await _histogram(conn, "api_metrics_claim_to_start"),
        run=await _histogram(conn, "api_metrics_run"),
    )


class SnapshotCollector:
    """A prometheus_client collector over one snapshot (collectors are synchronous)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def _labels(self, queue_id: UUID) -> list[str]:
        return [str(queue_id), self.snapshot.queue_names.get(queue_id, "")]

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        depth = GaugeMetricFamily(
            "codity_queue_depth",
            "Jobs per queue and status",
            labels=["queue_id", "queue", "status"],
        )
        seen = {(q, st) for q, st, _ in s.depth}
        for queue_id, status, n in s.depth:
            depth.add_metric([*self._labels(queue_id), status], n)
        for queue_id in s.queue_names:  # every status present, zero included, for every queue
            for status in JobStatus:
                if (queue_id, status.value) not in seen:
                    depth.add_metric([*self._labels(queue_id), status.value], 0)
        yield depth

        paused = GaugeMetricFamily(
            "codity_queue_paused", "1 while the queue is paused", labels=["queue_id", "queue"]
        )
        for queue_id, is_paused in s.paused.items():
            paused.add_metric(self._labels(queue_id), 1 if is_paused else 0)
        yield paused

        workers = GaugeMetricFamily("codity_workers", "Workers per status", labels=["status"])
        for status in WorkerStatus:
            workers.add_metric([status.value], s.workers.get(status.value, 0))
        yield workers

        yield from self._counters()
        yield _histogram_family(
            "codity_job_claim_to_start_seconds",
            "Time from claim to handler start, per attempt",
            s.claim_to_start,
        )
        yield _histogram_family(
            "codity_job_run_seconds", "Handler run time, per finished attempt", s.run
        )

    def _counters(self) -> Iterator[Metric]:
        s = self.snapshot
        specs: Sequence[tuple[str, str, str]] = (
            ("codity_jobs_started", "Attempts that reached a handler", "started"),
            ("codity_jobs_completed", "Attempts that completed", "completed"),
            ("codity_jobs_failed", "Attempts that failed or timed out", "failed"),
            ("codity_lease_expiries", "Attempts lost to an expired lease", "lost"),
        )
        for name, doc, key in specs:
            family = CounterMetricFamily(name, doc, labels=["queue_id", "queue"])
            for queue_id in s.queue_names:
                family.add_metric(
                    self._labels(queue_id), s.executions.get(queue_id, {}).get(key, 0)
                )
            yield family
        dead = CounterMetricFamily(
            "codity_jobs_dead_lettered",
            "Jobs moved to the dead-letter queue",
            labels=["queue_id", "queue"],
        )
        for queue_id in s.queue_names:
            dead.add_metric(self._labels(queue_id), s.dead_lettered.get(queue_id, 0))
        yield dead


def _histogram_family(name: str, doc: str, h: Histogram) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc)
    family.add_metric([], h.buckets, h.total)
    return family


async def render(conn: Conn) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(await take_snapshot(conn)))
    body: bytes = generate_latest(registry)
    return body


class SnapshotCache:
    """The last rendered body and when it was taken; one refresh at a time."""

    def __init__(self) -> None:
        self._body = b""
        self._taken_at = -math.inf
        self._lock = asyncio.Lock()
        #: Snapshots taken (each one: the statements of `take_snapshot`); for tests and figures.
        self.refreshes = 0

    async def body(self, conn: Conn, max_age_s: float) -> bytes:
        if time.monotonic() - self._taken_at < max_age_s:
            return self._body
        async with self._lock:
            # Another scrape may have refreshed it while this one waited for the lock.
            if time.monotonic() - self._taken_at >= max_age_s:
                self._body = await render(conn)
                self._taken_at = time.monotonic()
                self.refreshes += 1
        return self._body


def _cache(app_state: Any) -> SnapshotCache:
    cache: SnapshotCache | None = getattr(app_state, "metrics_cache", None)
    if cache is None:
        cache = app_state.metrics_cache = SnapshotCache()
    return cache


async def _answer(request: Request) -> Response:
    settings: Settings = request.app.state.settings
    body = await _cache(request.app.state).body(request.app.state.pool, settings.metrics_snapshot_s)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def token_matches(settings: Settings, authorization: str | None) -> bool:
    """A bearer METRICS_TOKEN, compared in constant time; never when no token is configured."""
    if not settings.metrics_token or not authorization:
        return False
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        token.strip().encode(), settings.metrics_token.encode()
    )


router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    settings: Settings = request.app.state.settings
    if not token_matches(settings, request.headers.get("authorization")):
        where = f" or scrape {settings.metrics_bind}" if settings.metrics_bind else ""
        return error_response(
            401,
            "unauthorized",
            f"/metrics needs Authorization: Bearer <METRICS_TOKEN>{where}",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return await _answer(request)


def bind_address(value: str) -> tuple[str, int]:
    """METRICS_BIND `host:port` (IPv6 as `[::1]:9464`) -> (host, port)."""
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigurationError(f"METRICS_BIND must be host:port, got {value!r}")
    return host.strip("[]"), int(port)


def private_listener_app(main_state: Any) -> Starlette:
    """The METRICS_BIND listener: `/metrics` only, no token, the main app's pool and cache."""

    async def private_metrics(request: Request) -> Response:
        body = await _cache(main_state).body(
            main_state.pool, main_state.settings.metrics_snapshot_s
        )
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return Starlette(routes=[Route("/metrics", private_metrics, methods=["GET"])])


class _ListenerServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signals to the main server and says when it
    listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.listening.set()


@contextlib.asynccontextmanager
async def private_listener(main_state: Any) -> AsyncIterator[None]:
    """Serve `/metrics` on METRICS_BIND while the API runs (no-op when it is unset)."""
    settings: Settings = main_state.settings
    if not settings.metrics_bind:
        yield
        return
    host, port = bind_address(settings.metrics_bind)
    config = uvicorn.Config(
        private_listener_app(main_state),
        host=host,
        port=port,
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
    )
    server = _ListenerServer(config)
    task = asyncio.create_task(server.serve())
    listening = asyncio.create_task(server.listening.wait())
    await asyncio.wait([task, listening], return_when=asyncio.FIRST_COMPLETED)
    if not server.listening.is_set():  # the port is taken or the address is wrong: say so now
        listening.cancel()
        with contextlib.suppress(BaseException):  # uvicorn exits (SystemExit) on a bind error
            await task
        raise ConfigurationError(f"cannot listen on METRICS_BIND {settings.metrics_bind}")
    try:
        yield
    finally:
        server.should_exit = True
        await task
