"""`/metrics` in Prometheus text format, derived from the database at scrape time.

The API process runs no job, so in-process counters would stay at zero. Instead a custom
collector reads the numbers from PostgreSQL on each scrape (a handful of grouped counts):

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
them drop, which Prometheus handles as a counter reset. The endpoint carries no tenant
secrets but does name queues: expose it to the monitoring network only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from codity.core import Conn
from codity.db.queries import bind
from codity.domain.states import JobStatus, WorkerStatus

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


router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    pool: Any = request.app.state.pool
    return Response(await render(pool), media_type=CONTENT_TYPE_LATEST)
