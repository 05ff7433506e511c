"""Queues with their live depth, as lists, single reads and statistics."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from codity.api.read_models.throughput import (
    last_hour_throughput,
    run_percentiles,
    wait_percentiles,
)
from codity.api.schemas.queues import QueueDepth, QueuePublic, QueueStats
from codity.api.schemas.retry_policies import RetryPolicySummary
from codity.core import Conn
from codity.domain.errors import QueueNotFoundError

#: A queue row, its retry policy summary, its depth per status (one grouped count over
#: idx_jobs_queue_status_id) and how many jobs a worker could claim this instant
#: (the claim index: queued and due; zero while paused). $1 = project_id; the caller appends
#: further conditions on `q`.
_QUEUE_SELECT = """
SELECT q.id, q.project_id, q.name, q.description, q.priority, q.concurrency_limit, q.is_paused,
       q.default_max_attempts, q.default_timeout_ms, q.rate_limit_per_minute,
       q.created_at, q.updated_at,
       rp.id AS rp_id, rp.name AS rp_name, rp.strategy::text AS rp_strategy,
       rp.max_attempts AS rp_max_attempts,
       coalesce(d.depth, '{}'::jsonb) AS depth,
       CASE WHEN q.is_paused THEN 0 ELSE c.claimable END AS claimable
FROM queues q
LEFT JOIN retry_policies rp ON rp.id = q.retry_policy_id
LEFT JOIN LATERAL (
  SELECT jsonb_object_agg(s.status, s.n) AS depth
  FROM (SELECT j.status::text AS status, count(*) AS n
        FROM jobs j WHERE j.queue_id = q.id GROUP BY j.status) s
) d ON true
LEFT JOIN LATERAL (
  SELECT count(*) AS claimable
  FROM jobs j WHERE j.queue_id = q.id AND j.status = 'queued' AND j.run_at <= now()
) c ON true
WHERE q.project_id = $1
"""


def queue_from_row(row: asyncpg.Record) -> QueuePublic:
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
        retry_policy=policy,
        default_max_attempts=row["default_max_attempts"],
        default_timeout_ms=row["default_timeout_ms"],
        rate_limit_per_minute=row["rate_limit_per_minute"],
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
    rows = await conn.fetch(
        _QUEUE_SELECT + " AND ($2::text IS NULL OR q.name > $2) ORDER BY q.name LIMIT $3",
        project_id,
        after_name,
        limit,
    )
    return [queue_from_row(r) for r in rows]


async def get_queue(conn: Conn, project_id: UUID, queue_id: UUID) -> QueuePublic:
    row = await conn.fetchrow(_QUEUE_SELECT + " AND q.id = $2", project_id, queue_id)
    if row is None:
        raise QueueNotFoundError(f"no queue {queue_id} in this project")
    return queue_from_row(row)


async def queue_stats(conn: Conn, project_id: UUID, queue_id: UUID) -> QueueStats:
    queue = await get_queue(conn, project_id, queue_id)
    return QueueStats(
        queue_id=queue.id,
        name=queue.name,
        is_paused=queue.is_paused,
        depth=queue.depth,
        claimable=queue.claimable,
        running=queue.running,
        throughput=await last_hour_throughput(conn, [queue.id]),
        wait=await wait_percentiles(conn, queue.id),
        run=await run_percentiles(conn, queue.id),
    )
