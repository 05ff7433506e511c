"""Queues of a project: live depth, statistics, and their configuration (create, change,
delete). SQL: `db/sql/api_queues.sql`. Pause and resume are `codity.core` operations."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from codity.api.schemas.queues import (
    DurationPercentiles,
    QueueCreate,
    QueueDepth,
    QueuePublic,
    QueueStats,
    RateLimit,
    ThroughputBucket,
)
from codity.api.schemas.retry_policies import RetryPolicySummary
from codity.api.stores import retry_policies
from codity.api.stores._constraints import constraint_errors
from codity.core import Conn
from codity.db.queries import Fragments, bind
from codity.domain.errors import QueueBusyError, QueueNotFoundError

#: Columns a PATCH may set (api_queues_update changes exactly the ones named in `fields`).
UPDATABLE = (
    "description",
    "priority",
    "concurrency_limit",
    "retry_policy_id",
    "default_max_attempts",
    "default_timeout_ms",
    "rate_limit_per_minute",
    "key_concurrency_limit",
    "rate_limit_count",
    "rate_limit_period_ms",
    "rate_limit_per_key",
)


def _rate_columns(rate_limit: dict[str, Any] | None) -> dict[str, int | None]:
    """The API's `rate_limit {count, period_s}` as the two columns that store it."""
    if rate_limit is None:
        return {"rate_limit_count": None, "rate_limit_period_ms": None}
    return {
        "rate_limit_count": rate_limit["count"],
        "rate_limit_period_ms": max(1, round(rate_limit["period_s"] * 1000)),
    }


def _rate_limit(row: asyncpg.Record) -> RateLimit | None:
    if row["rate_limit_count"] is None:
        return None
    return RateLimit(count=row["rate_limit_count"], period_s=row["rate_limit_period_ms"] / 1000)


def _queue(row: asyncpg.Record) -> QueuePublic:
    depth = QueueDepth(**{k: int(v) for k, v in row["depth"].items()})
    policy = (
        RetryPolicySummary(
            id=row["rp_id"],
            name=row["rp_name"],
            strategy=row["rp_strategy"],
            max_attempts=row["rp_max_attempts"],
        )
        if row["rp_id"] is not None
        else None
    )
    return QueuePublic(
        id=row["id"],
        project_id=row["project_id"],
        name=row["name"],
        description=row["description"],
        priority=row["priority"],
        concurrency_limit=row["concurrency_limit"],
        is_paused=row["is_paused"],
        draining_since=row["draining_since"],
        retry_policy=policy,
        default_max_attempts=row["default_max_attempts"],
        default_timeout_ms=row["default_timeout_ms"],
        rate_limit_per_minute=row["rate_limit_per_minute"],
        key_concurrency_limit=row["key_concurrency_limit"],
        rate_limit=_rate_limit(row),
        rate_limit_per_key=row["rate_limit_per_key"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        depth=depth,
        claimable=row["claimable"],
        running=depth.claimed + depth.running,
    )


async def list_queues(
    conn: Conn, project_id: UUID, *, limit: int, after_name: str | None
) -> list[QueuePublic]:
    """Queues ordered by name (unique per project, so the name is the keyset)."""
    where = Fragments()
    if after_name is not None:
        where.add("api_queues_after", after_name=after_name)
    q = where.bind("api_queues_list", project_id=project_id, limit=limit)
    return [_queue(r) for r in await q.fetch(conn)]


async def get_queue(conn: Conn, project_id: UUID, queue_id: UUID) -> QueuePublic:
    q = bind(
        "api_queues_list", "api_queues_when_id", project_id=project_id, queue_id=queue_id, limit=1
    )
    row = await q.fetchrow(conn)
    if row is None:
        raise QueueNotFoundError(f"no queue {queue_id} in this project")
    return _queue(row)


async def last_hour_throughput(
    conn: Conn, project_id: UUID, queue_id: UUID | None = None
) -> list[ThroughputBucket]:
    """Per minute of the last hour, for the project's queues (or one of them)."""
    where = Fragments()
    if queue_id is not None:
        where.add("api_queues_throughput_of_queue", queue_id=queue_id)
    q = where.bind("api_queues_throughput", project_id=project_id)
    return [
        ThroughputBucket(minute=r["minute"], completed=r["completed"], failed=r["failed"])
        for r in await q.fetch(conn)
    ]


async def _percentiles(
    conn: Conn, name: str, project_id: UUID, queue_id: UUID
) -> DurationPercentiles:
    q = bind(name, project_id=project_id, queue_id=queue_id)
    row = await q.fetchrow(conn)
    assert row is not None  # an aggregate always answers one row

    def ms(value: Any) -> float | None:
        return None if value is None else round(float(value), 3)

    return DurationPercentiles(p50_ms=ms(row["p50"]), p95_ms=ms(row["p95"]), samples=row["samples"])


async def queue_stats(conn: Conn, project_id: UUID, queue_id: UUID) -> QueueStats:
    queue = await get_queue(conn, project_id, queue_id)
    return QueueStats(
        queue_id=queue.id,
        name=queue.name,
        is_paused=queue.is_paused,
        depth=queue.depth,
        claimable=queue.claimable,
        running=queue.running,
        throughput=await last_hour_throughput(conn, project_id, queue.id),
        wait=await _percentiles(conn, "api_queues_wait", project_id, queue.id),
        run=await _percentiles(conn, "api_queues_run", project_id, queue.id),
    )


async def create_queue(conn: Conn, project_id: UUID, body: QueueCreate) -> UUID:
    await retry_policies.require_in_project(conn, project_id, body.retry_policy_id)
    q = bind(
        "api_queues_insert",
        project_id=project_id,
        name=body.name,
        description=body.description,
        priority=body.priority,
        concurrency_limit=body.concurrency_limit,
        retry_policy_id=body.retry_policy_id,
        default_max_attempts=body.default_max_attempts,
        default_timeout_ms=body.default_timeout_ms,
        rate_limit_per_minute=body.rate_limit_per_minute,
        key_concurrency_limit=body.key_concurrency_limit,
        rate_limit_per_key=body.rate_limit_per_key,
        **_rate_columns(body.rate_limit.model_dump() if body.rate_limit else None),
    )
    async with constraint_errors("queue"):
        queue_id: UUID = await q.fetchval(conn)
    return queue_id


async def update_queue(
    conn: Conn, project_id: UUID, queue_id: UUID, changes: dict[str, Any]
) -> None:
    if "retry_policy_id" in changes:
        await retry_policies.require_in_project(conn, project_id, changes["retry_policy_id"])
    if "rate_limit" in changes:
        changes = {**changes, **_rate_columns(changes["rate_limit"])}
    fields = [name for name in UPDATABLE if name in changes]
    q = bind(
        "api_queues_update",
        project_id=project_id,
        queue_id=queue_id,
        fields=fields,
        **{name: changes.get(name) for name in UPDATABLE},
    )
    async with constraint_errors("queue"):
        found = await q.fetchval(conn)
    if found is None:
        raise QueueNotFoundError(f"no queue {queue_id} in this project")


async def delete_queue(conn: asyncpg.Connection[Any], project_id: UUID, queue_id: UUID) -> None:
    """Deletes the queue and its jobs, unless a worker is executing one of them right now.

    The queue row is locked first (concurrency-limited claims lock it too). A claim racing the
    delete on an unlimited queue loses its job to the cascade; the worker's fenced completion
    then matches no row and is reported as a lost lease, which is the protocol's normal path.
    """
    ids = {"project_id": project_id, "queue_id": queue_id}
    async with conn.transaction():
        lock = bind("api_queues_lock", **ids)
        if await lock.fetchval(conn) is None:
            raise QueueNotFoundError(f"no queue {queue_id} in this project")
        busy_q = bind("api_queues_busy", **ids)
        busy = await busy_q.fetchval(conn)
        if busy:
            raise QueueBusyError(
                f"{busy} job(s) of this queue are being executed; pause the queue and retry "
                "once they finish",
                details={"running": busy},
            )
        delete = bind("api_queues_delete", **ids)
        await delete.execute(conn)
