"""Cluster-wide upkeep the scheduler runs on a timer: reap, promote, sweep, prune.

Each is one short statement (or a few small batches) using SKIP LOCKED where rows are claimed,
so several scheduler replicas can run them at once without a leader.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from codity.core.connection import Conn, transaction
from codity.core.dependencies import cancel_dependants
from codity.core.enqueue import notify_queues
from codity.db.queries import sql
from codity.domain.errors import ValidationError
from codity.domain.states import JobStatus


@dataclass(frozen=True)
class PruneResult:
    jobs: int
    logs: int
    heartbeats: int
    rate_windows: int = 0


async def reap_expired(conn: Conn, limit: int = 500) -> list[int]:
    """Expired leases back to 'queued' (attempt refunded, 'lost' execution row); ids reaped.

    A job whose cancel was requested is cancelled instead of requeued.
    """
    async with transaction(conn) as tx:
        rows = await tx.fetch(sql("reap_expired"), limit)
        cancelled = [r["id"] for r in rows if r["status"] == JobStatus.CANCELLED]
        await cancel_dependants(tx, cancelled)
        await notify_queues(
            tx, sorted({r["queue_id"] for r in rows if r["status"] == JobStatus.QUEUED})
        )
    return [r["id"] for r in rows]


async def promote_due(conn: Conn, limit: int = 1000) -> int:
    """Scheduled jobs whose run_at has passed become 'queued'; returns how many."""
    async with transaction(conn) as tx:
        rows = await tx.fetch(sql("promote_due"), limit)
        await notify_queues(tx, sorted({r["queue_id"] for r in rows}))
    return len(rows)


async def sweep_dead_workers(conn: Conn, dead_after_ms: int) -> list[UUID]:
    """Active/draining workers silent for `dead_after_ms` become 'dead' (stopped_at set)."""
    if dead_after_ms <= 0:
        raise ValidationError(f"dead_after_ms must be positive, got {dead_after_ms}")
    rows = await conn.fetch(sql("sweep_dead_workers"), dead_after_ms)
    return [r["id"] for r in rows]


async def _drain(conn: Conn, name: str, before: datetime, batch: int) -> int:
    total = 0
    while True:
        status = await conn.execute(sql(name), before, batch)
        n = int(status.rsplit(" ", 1)[-1])
        total += n
        if n < batch:
            return total


async def prune(
    conn: Conn, *, finished_before: datetime, logs_before: datetime, batch: int = 500
) -> PruneResult:
    """Delete finished jobs, old logs/heartbeat history and spent rate-limit windows, `batch`
    rows per statement."""
    if batch <= 0:
        raise ValidationError(f"batch must be positive, got {batch}")
    if finished_before.tzinfo is None or logs_before.tzinfo is None:
        raise ValidationError("prune cut-offs must be timezone-aware datetimes")
    return PruneResult(
        jobs=await _drain(conn, "prune_jobs", finished_before, batch),
        logs=await _drain(conn, "prune_logs", logs_before, batch),
        heartbeats=await _drain(conn, "prune_heartbeats", logs_before, batch),
        # Windows whose every start has aged out count nothing: now is their cut-off.
        rate_windows=await _drain(conn, "prune_rate_windows", datetime.now(UTC), batch),
    )
