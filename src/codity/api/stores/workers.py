"""Workers as a tenant sees them: only those serving its queues, and only its queues listed.
SQL: `db/sql/api_workers.sql`."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from codity.api.schemas.workers import WorkerPublic, WorkerQueue
from codity.core import Conn
from codity.db.queries import Fragments
from codity.domain.states import WorkerStatus


async def list_workers(
    conn: Conn,
    org_id: UUID,
    *,
    project_id: UUID | None,
    status: WorkerStatus | None,
    limit: int,
    after: tuple[datetime, UUID] | None,
) -> list[WorkerPublic]:
    where = Fragments()
    if project_id is not None:
        where.add("api_workers_of_project", project_id=project_id)
    if status is not None:
        where.add("api_workers_when_status", status=status.value)
    if after is not None:
        where.add("api_workers_after", after_started_at=after[0], after_id=after[1])
    q = where.bind("api_workers_list", org_id=org_id, limit=limit)
    return [
        WorkerPublic(
            id=r["id"],
            hostname=r["hostname"],
            pid=r["pid"],
            version=r["version"],
            status=r["status"],
            capacity=r["capacity"],
            in_flight=r["in_flight"],
            lingering_threads=r["lingering_threads"],
            started_at=r["started_at"],
            stopped_at=r["stopped_at"],
            last_heartbeat_at=r["last_heartbeat_at"],
            uptime_s=round(max(0.0, float(r["uptime_s"])), 3),
            heartbeat_age_s=round(max(0.0, float(r["heartbeat_age_s"])), 3),
            queues=[WorkerQueue.model_validate(x) for x in r["queues"]],
        )
        for r in await q.fetch(conn)
    ]
