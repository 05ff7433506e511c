"""The worker registry: a worker registers once, then heartbeats (see lease.heartbeat)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from codity.core.connection import Conn
from codity.db.queries import sql
from codity.domain.errors import NotFoundError, ValidationError
from codity.domain.states import WorkerStatus


async def register_worker(
    conn: Conn,
    *,
    hostname: str,
    pid: int,
    version: str,
    capacity: int,
    queue_ids: Sequence[UUID],
    queue_names: Sequence[str],
    handlers: Sequence[str] = (),
) -> UUID:
    """Insert a worker row (status active), the queues it serves and the handler names it runs
    (jobs explain reads them); returns its id."""
    if capacity <= 0:
        raise ValidationError(f"capacity must be positive, got {capacity}")
    worker_id: UUID = await conn.fetchval(
        sql("register_worker"),
        hostname,
        pid,
        version,
        capacity,
        list(queue_names),
        list(queue_ids),
        sorted(set(handlers)),
    )
    return worker_id


async def set_worker_status(conn: Conn, worker_id: UUID, status: WorkerStatus) -> None:
    """Set a worker's status; stopped and dead also set stopped_at (freezing its uptime)."""
    status = WorkerStatus(status)
    if await conn.fetchval(sql("set_worker_status"), worker_id, status.value) is None:
        raise NotFoundError(f"no worker with id {worker_id}", details={"worker": str(worker_id)})
