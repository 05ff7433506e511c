"""The scheduler's loops. Each one calls a single `codity.core` function; core makes it safe to
run with any number of replicas (SKIP LOCKED claims, idempotent cron keys, conditional updates),
so there is no leader to elect and no replica to lose."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from codity import core
from codity.core.loop_service import LoopService

log = structlog.get_logger("codity.scheduler")

PROMOTE_BATCH = 1000
CRON_BATCH = 100
REAP_BATCH = 500
PRUNE_BATCH = 500


class Promoter(LoopService):
    """Delayed and backed-off jobs whose time has come: scheduled -> queued."""

    name = "promoter"

    async def run_once(self) -> bool:
        promoted = await core.promote_due(self.conn, limit=PROMOTE_BATCH)
        if promoted:
            log.info("promoted due jobs", count=promoted)
        return promoted >= PROMOTE_BATCH


class CronMaterialiser(LoopService):
    """Due schedules -> one job per occurrence; a missed run fires once. Firings count against
    the enqueue quotas and come no closer together than CRON_MIN_INTERVAL_S."""

    name = "cron"

    def __init__(
        self,
        conn: Any,
        *,
        interval_ms: int,
        limits: core.EnqueueLimits | None = None,
        min_interval_s: int = 0,
    ) -> None:
        super().__init__(conn, interval_ms=interval_ms)
        self.limits = limits
        self.min_interval_s = min_interval_s

    async def run_once(self) -> bool:
        job_ids = await core.materialise_cron(
            self.conn, limit=CRON_BATCH, limits=self.limits, min_interval_s=self.min_interval_s
        )
        if job_ids:
            log.info("cron occurrences enqueued", job_ids=job_ids)
        return len(job_ids) >= CRON_BATCH


class Reaper(LoopService):
    """Expired leases (a worker vanished) back to queued, the attempt refunded."""

    name = "reaper"

    async def run_once(self) -> bool:
        reaped = await core.reap_expired(self.conn, limit=REAP_BATCH)
        if reaped:
            log.warning("reaped expired leases", job_ids=reaped)
        return len(reaped) >= REAP_BATCH


class DeadWorkerSweep(LoopService):
    """Workers silent for longer than DEAD_WORKER_AFTER_MS become dead, their uptime frozen."""

    name = "dead-worker-sweep"

    def __init__(self, conn: Any, *, interval_ms: int, dead_after_ms: int) -> None:
        super().__init__(conn, interval_ms=interval_ms)
        self.dead_after_ms = dead_after_ms

    async def run_once(self) -> bool:
        dead = await core.sweep_dead_workers(self.conn, self.dead_after_ms)
        if dead:
            log.warning("workers declared dead", worker_ids=[str(w) for w in dead])
        return False


class Pruner(LoopService):
    """Retention: finished jobs and old logs deleted in small batches."""

    name = "pruner"

    def __init__(
        self, conn: Any, *, interval_ms: int, keep_finished: timedelta, keep_logs: timedelta
    ) -> None:
        super().__init__(conn, interval_ms=interval_ms)
        self.keep_finished = keep_finished
        self.keep_logs = keep_logs

    async def run_once(self) -> bool:
        now = datetime.now(UTC)
        result = await core.prune(
            self.conn,
            finished_before=now - self.keep_finished,
            logs_before=now - self.keep_logs,
            batch=PRUNE_BATCH,
        )
        if result.jobs or result.logs or result.heartbeats:
            log.info("pruned", jobs=result.jobs, logs=result.logs, heartbeats=result.heartbeats)
        return False


class StatsRollup(LoopService):
    """Closed minutes of job history -> the per-minute/per-hour rows the dashboard charts read
    (queue depth, wait and run time histograms, completed/failed, per-worker counts)."""

    name = "stats-rollup"

    async def run_once(self) -> bool:
        result = await core.rollup_stats(self.conn, datetime.now(UTC))
        return result.more


class DrainFinisher(LoopService):
    """Draining queues with nothing unfinished left are paused; their drain ends."""

    name = "drain-finisher"

    async def run_once(self) -> bool:
        finished = await core.finish_drains(self.conn)
        if finished:
            log.info("queues drained and paused", queue_ids=[str(q) for q in finished])
        return False
