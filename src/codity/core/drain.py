"""Draining a queue: no new jobs, finish the ones it has, then pause (scheduler's drain loop)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from codity.core.connection import Conn
from codity.db.queries import sql
from codity.domain.errors import QueueDrainingError, QueueNotFoundError


async def start_drain(conn: Conn, project_id: UUID, queue_id: UUID) -> None:
    if await conn.fetchval(sql("start_drain"), project_id, queue_id) is None:
        raise QueueNotFoundError(f"no queue {queue_id} in this project")


async def cancel_drain(conn: Conn, project_id: UUID, queue_id: UUID) -> None:
    await conn.execute(sql("cancel_drain"), project_id, queue_id)


async def refuse_if_draining(conn: Conn, project_id: UUID, queue_ids: Sequence[UUID]) -> None:
    """QueueDrainingError (409 queue_draining) when any of these queues is draining."""
    rows = await conn.fetch(sql("queue_draining_since"), project_id, list(queue_ids))
    if rows:
        names = ", ".join(sorted(r["name"] for r in rows))
        raise QueueDrainingError(
            f"queue {names} is draining: it takes no new jobs until it is resumed",
            details={"queues": sorted(r["name"] for r in rows)},
        )


async def finish_drains(conn: Conn) -> list[UUID]:
    """Pause every draining queue that has nothing unfinished left; their ids."""
    return [r["id"] for r in await conn.fetch(sql("finish_drains"))]
