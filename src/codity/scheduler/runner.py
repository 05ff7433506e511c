"""`codity scheduler`: every loop in one process, sharing one small pool, until stopped."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import structlog

from codity.core.loop_service import LoopService, retry
from codity.core.quotas import EnqueueLimits
from codity.db.pool import create_pool
from codity.scheduler.services import (
    CronMaterialiser,
    DeadWorkerSweep,
    DrainFinisher,
    Promoter,
    Pruner,
    Reaper,
    StatsRollup,
)
from codity.settings import Settings

log = structlog.get_logger("codity.scheduler")

#: The pruner has no reason to run every tick; retention is measured in hours.
PRUNE_INTERVAL_MS = 60_000


@dataclass(frozen=True)
class SchedulerConfig:
    database_url: str
    tick_ms: int
    dead_worker_after_ms: int
    keep_finished: timedelta
    keep_logs: timedelta
    prune_interval_ms: int = PRUNE_INTERVAL_MS
    #: Cron firings count against the enqueue quotas; None: not counted (tests, benchmarks).
    enqueue_limits: EnqueueLimits | None = None
    cron_min_interval_s: int = 0

    @classmethod
    def from_settings(cls, settings: Settings, *, database_url: str) -> SchedulerConfig:
        return cls(
            database_url=database_url,
            tick_ms=settings.scheduler_tick_ms,
            dead_worker_after_ms=settings.dead_worker_after_ms,
            keep_finished=timedelta(hours=settings.retention_completed_hours),
            keep_logs=timedelta(hours=settings.retention_logs_hours),
            prune_interval_ms=max(settings.scheduler_tick_ms, PRUNE_INTERVAL_MS),
            enqueue_limits=EnqueueLimits(
                per_project=settings.rate_limit_enqueue_per_minute,
                per_org=settings.rate_limit_enqueue_per_minute_org,
            ),
            cron_min_interval_s=settings.cron_min_interval_s,
        )


def build_services(conn: Any, config: SchedulerConfig) -> list[LoopService]:
    tick = config.tick_ms
    return [
        Promoter(conn, interval_ms=tick),
        CronMaterialiser(
            conn,
            interval_ms=tick,
            limits=config.enqueue_limits,
            min_interval_s=config.cron_min_interval_s,
        ),
        Reaper(conn, interval_ms=tick),
        DeadWorkerSweep(conn, interval_ms=tick, dead_after_ms=config.dead_worker_after_ms),
        StatsRollup(conn, interval_ms=tick),
        DrainFinisher(conn, interval_ms=tick),
        Pruner(
            conn,
            interval_ms=config.prune_interval_ms,
            keep_finished=config.keep_finished,
            keep_logs=config.keep_logs,
        ),
    ]


async def run_scheduler(config: SchedulerConfig, stop: asyncio.Event) -> None:
    pool: Any = await retry(
        "connect",
        lambda: create_pool(
            config.database_url, min_size=1, max_size=5, application_name="codity-scheduler"
        ),
        stop=stop,
    )
    if pool is None:
        return
    services = build_services(pool, config)
    log.info("scheduler started", loops=[s.name for s in services], tick_ms=config.tick_ms)
    try:
        await asyncio.gather(*(s.run(stop) for s in services))
    finally:
        try:
            await asyncio.wait_for(pool.close(), timeout=5)
        except (TimeoutError, OSError):
            pool.terminate()
        log.info("scheduler stopped")
