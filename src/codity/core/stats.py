"""The chart rollups: closed minutes of job history folded into small per-minute and per-hour
rows (queue_stats, handler_stats, worker_stats) that the dashboard's charts read.

One call rolls up at most one minute (and the hour it closes), under the watermark row's lock,
so any number of scheduler replicas can call it: the one that holds the lock does the work,
the others find the row locked and return at once. Rolling a minute up twice writes the same
rows again (upserts), so a crash between the rows and the watermark is harmless.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from codity.core.connection import Conn, transaction
from codity.db.queries import sql
from codity.domain import histogram

WATERMARK = "minute"
MINUTE = timedelta(minutes=1)
#: A minute is rolled up this long after it closed: completions are batched by workers, so an
#: attempt that ended at :59.9 may be committed a moment later.
SETTLE = timedelta(seconds=5)
#: After an outage, history older than this is not rolled up (charts show a gap instead of the
#: scheduler spending hours catching up); the first run back-fills this much history.
MAX_CATCH_UP = timedelta(hours=24)
#: Retention of the rollups: minute rows feed the 1 h chart, quarter rows the 24 h one and hour
#: rows the 7 d one (each chart also reads the minute rows of its unfinished last bucket).
KEEP_MINUTES = timedelta(days=2)
KEEP_HOURS = timedelta(days=31)
GRAIN_MINUTE = 1
GRAIN_QUARTER = 15
GRAIN_HOUR = 60


@dataclass(frozen=True)
class RollupResult:
    minute: datetime | None  # the minute rolled up, None when there was nothing to do
    more: bool  # another closed minute is waiting


def floor_minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def _hist_text(hist: list[int]) -> str:
    return "{" + ",".join(map(str, hist)) + "}"


async def rollup_stats(conn: Conn, now: datetime) -> RollupResult:
    """Roll up the oldest closed minute not yet done (and its hour when it closes one)."""
    async with transaction(conn) as tx:
        row = await tx.fetchrow(sql("lock_rollup_watermark"), WATERMARK)
        if row is None:
            # No row yet (first run: back-fill the catch-up window, so an existing install's
            # charts are not empty), or another replica holds it right now.
            await tx.execute(
                sql("init_rollup_watermark"), WATERMARK, floor_minute(now - MAX_CATCH_UP)
            )
            return RollupResult(None, False)
        minute: datetime = row["done_until"]
        oldest = floor_minute(now - MAX_CATCH_UP)
        if minute < oldest:
            minute = oldest
        if minute + MINUTE + SETTLE > now:
            return RollupResult(None, False)
        latest = minute + 2 * MINUTE + SETTLE > now  # the last closed minute: sample "now"
        await _roll_minute(tx, minute, sample=latest)
        end = minute + MINUTE
        for grain in (GRAIN_QUARTER, GRAIN_HOUR):
            if (end.hour * 60 + end.minute) % grain == 0:
                await _roll_span(tx, end - timedelta(minutes=grain), grain)
        if end.minute == 0:
            await tx.execute(sql("prune_stats"), now - KEEP_MINUTES, now - KEEP_HOURS)
        await tx.execute(sql("advance_rollup_watermark"), WATERMARK, minute + MINUTE)
        return RollupResult(minute, not latest)


async def _roll_minute(tx: Any, minute: datetime, *, sample: bool) -> None:
    rows = await tx.fetch(
        sql("minute_executions"),
        minute,
        math.log(histogram.MIN_MS),
        math.log(histogram.MAX_MS),
        histogram.BUCKETS,
    )
    queues: dict[UUID, dict[str, Any]] = defaultdict(
        lambda: {"completed": 0, "failed": 0, "wait": []}
    )
    handlers: dict[tuple[UUID, str], dict[str, Any]] = defaultdict(
        lambda: {"completed": 0, "failed": 0, "run": []}
    )
    workers: dict[tuple[UUID, UUID], dict[str, Any]] = defaultdict(
        lambda: {"completed": 0, "failed": 0, "in_flight": None}
    )
    for r in rows:
        q, h = queues[r["queue_id"]], handlers[(r["queue_id"], r["handler"])]
        for target in (q, h):
            target["completed"] += r["completed"]
            target["failed"] += r["failed"]
        if r["wait_slot"] is not None:
            q["wait"].append((r["wait_slot"], r["n"]))
        if r["run_slot"] is not None:
            h["run"].append((r["run_slot"], r["n"]))
        if r["worker_id"] is not None:
            w = workers[(r["queue_id"], r["worker_id"])]
            w["completed"] += r["completed"]
            w["failed"] += r["failed"]
    depth: dict[UUID, tuple[int | None, int | None]] = {}
    if sample:
        for r in await tx.fetch(sql("queue_depth_sample")):
            depth[r["queue_id"]] = (r["depth"], r["running"])
            _ = queues[r["queue_id"]]  # every sampled queue gets a row: depth with no traffic
        for r in await tx.fetch(sql("in_flight_sample")):
            workers[(r["queue_id"], r["worker_id"])]["in_flight"] = r["in_flight"]
    await _write(tx, GRAIN_MINUTE, minute, queues, handlers, workers, depth)


async def _write(
    tx: Any,
    grain: int,
    bucket: datetime,
    queues: dict[UUID, dict[str, Any]],
    handlers: dict[tuple[UUID, str], dict[str, Any]],
    workers: dict[tuple[UUID, UUID], dict[str, Any]],
    depth: dict[UUID, tuple[int | None, int | None]],
) -> None:
    if queues:
        ids = list(queues)
        await tx.execute(
            sql("upsert_queue_stats"),
            ids,
            [depth.get(q, (None, None))[0] for q in ids],
            [depth.get(q, (None, None))[1] for q in ids],
            [queues[q]["completed"] for q in ids],
            [queues[q]["failed"] for q in ids],
            [_hist_text(_as_hist(queues[q]["wait"])) for q in ids],
            grain,
            bucket,
        )
    if handlers:
        keys = list(handlers)
        await tx.execute(
            sql("upsert_handler_stats"),
            [k[0] for k in keys],
            [k[1] for k in keys],
            [handlers[k]["completed"] for k in keys],
            [handlers[k]["failed"] for k in keys],
            [_hist_text(_as_hist(handlers[k]["run"])) for k in keys],
            grain,
            bucket,
        )
    if workers:
        wkeys = list(workers)
        await tx.execute(
            sql("upsert_worker_stats"),
            [k[0] for k in wkeys],
            [k[1] for k in wkeys],
            [workers[k]["completed"] for k in wkeys],
            [workers[k]["failed"] for k in wkeys],
            [workers[k]["in_flight"] for k in wkeys],
            grain,
            bucket,
        )


def _as_hist(value: Any) -> list[int]:
    """A list of (slot, n) pairs (from the minute query) or an already summed histogram."""
    if value and isinstance(value[0], tuple):
        return histogram.from_counts(value)
    return list(value) if value else histogram.empty()


async def _roll_span(tx: Any, start: datetime, grain: int) -> None:
    """Sum a span's minute rows into its row of `grain`. Depth and in-flight: the latest sample."""
    queues: dict[UUID, dict[str, Any]] = {}
    depth: dict[UUID, tuple[int | None, int | None]] = {}
    latest: dict[UUID, datetime] = {}
    for r in await tx.fetch(sql("span_queue_rows"), start, grain):
        q = queues.setdefault(r["queue_id"], {"completed": 0, "failed": 0, "wait": []})
        q["completed"] += r["completed"]
        q["failed"] += r["failed"]
        q["wait"] = histogram.merge([q["wait"] or histogram.empty(), r["wait_hist"]])
        if r["depth"] is not None and r["bucket"] >= latest.get(r["queue_id"], r["bucket"]):
            latest[r["queue_id"]] = r["bucket"]
            depth[r["queue_id"]] = (r["depth"], r["running"])
    handlers: dict[tuple[UUID, str], dict[str, Any]] = {}
    for r in await tx.fetch(sql("span_handler_rows"), start, grain):
        h = handlers.setdefault(
            (r["queue_id"], r["handler"]), {"completed": 0, "failed": 0, "run": []}
        )
        h["completed"] += r["completed"]
        h["failed"] += r["failed"]
        h["run"] = histogram.merge([h["run"] or histogram.empty(), r["run_hist"]])
    workers: dict[tuple[UUID, UUID], dict[str, Any]] = {}
    seen: dict[tuple[UUID, UUID], datetime] = {}
    for r in await tx.fetch(sql("span_worker_rows"), start, grain):
        key = (r["queue_id"], r["worker_id"])
        w = workers.setdefault(key, {"completed": 0, "failed": 0, "in_flight": None})
        w["completed"] += r["completed"]
        w["failed"] += r["failed"]
        if r["in_flight"] is not None and r["bucket"] >= seen.get(key, r["bucket"]):
            seen[key] = r["bucket"]
            w["in_flight"] = r["in_flight"]
    await _write(tx, grain, start, queues, handlers, workers, depth)
