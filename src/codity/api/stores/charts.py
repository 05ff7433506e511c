"""Charts store: windows of points from the rollup tables (never from jobs or executions).

A window is read at one grain (1 h: minutes, 24 h: quarter hours, 7 d: hours) plus the minute
rows of its unfinished last bucket, then summed per bucket here: counts add, depth and
in-flight take the latest sample, and durations add their histograms before p50/p95 are read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from codity.api.schemas.charts import (
    Charts,
    ChartWindow,
    HandlerPoint,
    HandlerSeries,
    QueuePoint,
    WorkerPoint,
    WorkerSeries,
)
from codity.core import Conn
from codity.db.queries import sql
from codity.domain import histogram

#: (grain in minutes, number of buckets) per window.
WINDOWS: dict[ChartWindow, tuple[int, int]] = {
    ChartWindow.HOUR: (1, 60),
    ChartWindow.DAY: (15, 96),
    ChartWindow.WEEK: (60, 168),
}


def bucket_start(at: datetime, grain: int) -> datetime:
    minutes = at.hour * 60 + at.minute
    floored = at.replace(second=0, microsecond=0)
    return floored - timedelta(minutes=minutes % grain)


@dataclass
class _Acc:
    """One bucket of one series: counts add, histograms add, samples keep the latest per key
    (per queue) and those latest samples add up across keys."""

    completed: int = 0
    failed: int = 0
    hist: list[int] = field(default_factory=histogram.empty)
    samples: dict[UUID, tuple[datetime, int, int]] = field(default_factory=dict)

    def add(self, row: Any, hist: Sequence[int] | None = None) -> None:
        self.completed += row["completed"]
        self.failed += row["failed"]
        if hist is not None:
            self.hist = histogram.merge([self.hist, hist])

    def sample(self, key: UUID, at: datetime, value: int | None, other: int | None = None) -> None:
        if value is None:
            return
        seen = self.samples.get(key)
        if seen is None or at >= seen[0]:
            self.samples[key] = (at, value, other or 0)

    @property
    def sampled(self) -> int | None:
        return sum(v[1] for v in self.samples.values()) if self.samples else None

    @property
    def sampled_other(self) -> int | None:
        return sum(v[2] for v in self.samples.values()) if self.samples else None


async def read_charts(
    conn: Conn, project_id: UUID, window: ChartWindow, now: datetime, queue_id: UUID | None
) -> Charts:
    grain, count = WINDOWS[window]
    last = bucket_start(now, grain)
    start = last - timedelta(minutes=grain * (count - 1))
    args = (project_id, queue_id, grain, start, last, last - timedelta(minutes=grain))
    slots = [start + timedelta(minutes=grain * i) for i in range(count)]

    queue: dict[datetime, _Acc] = defaultdict(_Acc)
    for r in _usable(await conn.fetch(sql("chart_queue_rows"), *args), grain, "queue_id"):
        acc = queue[bucket_start(r["bucket"], grain)]
        acc.add(r, r["wait_hist"])
        acc.sample(r["queue_id"], r["bucket"], r["depth"], r["running"])

    handlers: dict[tuple[UUID, str], dict[datetime, _Acc]] = defaultdict(lambda: defaultdict(_Acc))
    names: dict[UUID, str] = {}
    for r in _usable(
        await conn.fetch(sql("chart_handler_rows"), *args), grain, "queue_id", "handler"
    ):
        names[r["queue_id"]] = r["queue_name"]
        handlers[(r["queue_id"], r["handler"])][bucket_start(r["bucket"], grain)].add(
            r, r["run_hist"]
        )

    workers: dict[UUID, dict[datetime, _Acc]] = defaultdict(lambda: defaultdict(_Acc))
    info: dict[UUID, Any] = {}
    for r in _usable(
        await conn.fetch(sql("chart_worker_rows"), *args), grain, "queue_id", "worker_id"
    ):
        info[r["worker_id"]] = r
        acc = workers[r["worker_id"]][bucket_start(r["bucket"], grain)]
        acc.add(r)
        acc.sample(r["queue_id"], r["bucket"], r["in_flight"])

    return Charts(
        window=window,
        bucket_minutes=grain,
        start=start,
        queue=[_queue_point(at, queue.get(at)) for at in slots],
        handlers=[
            _handler_series(qid, names[qid], name, series, slots)
            for (qid, name), series in sorted(
                handlers.items(), key=lambda kv: (names[kv[0][0]], kv[0][1])
            )
        ],
        workers=[
            WorkerSeries(
                worker_id=wid,
                hostname=info[wid]["hostname"],
                pid=info[wid]["pid"],
                status=info[wid]["status"],
                points=[_worker_point(at, series.get(at)) for at in slots],
            )
            for wid, series in sorted(
                workers.items(), key=lambda kv: (info[kv[0]]["hostname"], info[kv[0]]["pid"])
            )
        ],
    )


def _usable(rows: Sequence[Any], grain: int, *key: str) -> list[Any]:
    """The rows to add up: a bucket's coarse row when it has one, else its minute rows (a
    bucket whose last minute is not rolled up yet). Never both: that would count twice."""
    if grain == 1:
        return list(rows)
    coarse = {(*(r[k] for k in key), r["bucket"]) for r in rows if r["grain"] == grain}
    return [
        r
        for r in rows
        if r["grain"] == grain
        or (*(r[k] for k in key), bucket_start(r["bucket"], grain)) not in coarse
    ]


def _queue_point(at: datetime, acc: _Acc | None) -> QueuePoint:
    if acc is None:
        return QueuePoint(
            at=at, completed=0, failed=0, depth=None, running=None,
            wait_p50_ms=None, wait_p95_ms=None,
        )  # fmt: skip
    return QueuePoint(
        at=at,
        completed=acc.completed,
        failed=acc.failed,
        depth=acc.sampled,
        running=acc.sampled_other,
        wait_p50_ms=histogram.percentile(acc.hist, 0.5),
        wait_p95_ms=histogram.percentile(acc.hist, 0.95),
    )


def _handler_series(
    queue_id: UUID,
    queue_name: str,
    handler: str,
    series: dict[datetime, _Acc],
    slots: list[datetime],
) -> HandlerSeries:
    total = histogram.merge(acc.hist for acc in series.values())
    return HandlerSeries(
        queue_id=queue_id,
        queue_name=queue_name,
        handler=handler,
        completed=sum(acc.completed for acc in series.values()),
        failed=sum(acc.failed for acc in series.values()),
        run_p50_ms=histogram.percentile(total, 0.5),
        run_p95_ms=histogram.percentile(total, 0.95),
        points=[_handler_point(at, series.get(at)) for at in slots],
    )


def _handler_point(at: datetime, acc: _Acc | None) -> HandlerPoint:
    if acc is None:
        return HandlerPoint(at=at, completed=0, failed=0, run_p50_ms=None, run_p95_ms=None)
    return HandlerPoint(
        at=at,
        completed=acc.completed,
        failed=acc.failed,
        run_p50_ms=histogram.percentile(acc.hist, 0.5),
        run_p95_ms=histogram.percentile(acc.hist, 0.95),
    )


def _worker_point(at: datetime, acc: _Acc | None) -> WorkerPoint:
    if acc is None:
        return WorkerPoint(at=at, completed=0, failed=0, in_flight=None)
    return WorkerPoint(at=at, completed=acc.completed, failed=acc.failed, in_flight=acc.sampled)
