"""Workers as a tenant sees them: only those serving its queues, and only its queues listed."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from codity.api.schemas.workers import WorkerPublic, WorkerQueue
from codity.core import Conn
from codity.domain.states import WorkerStatus

#: A worker appears only when it serves at least one queue of the caller's org (optionally of
#: one project). Uptime is frozen at stopped_at once the worker stopped or was declared dead.
#: In-flight counts only the caller's jobs, so a shared worker leaks nothing about other tenants.
_WORKERS_SQL = """
SELECT w.id, w.hostname, w.pid, w.version, w.status::text AS status, w.capacity,
       w.started_at, w.stopped_at, w.last_heartbeat_at,
       extract(epoch FROM coalesce(w.stopped_at, now()) - w.started_at) AS uptime_s,
       extract(epoch FROM now() - w.last_heartbeat_at) AS heartbeat_age_s,
       mine.queues,
       (SELECT count(*) FROM jobs j
        WHERE j.worker_id = w.id AND j.status IN ('claimed', 'running')
          AND j.queue_id = ANY(mine.queue_ids)) AS in_flight
FROM workers w
JOIN LATERAL (
  SELECT jsonb_agg(jsonb_build_object('id', q.id, 'name', q.name, 'project_id', q.project_id)
                   ORDER BY q.name) AS queues,
         array_agg(q.id) AS queue_ids
  FROM worker_queues wq
  JOIN queues q ON q.id = wq.queue_id
  JOIN projects p ON p.id = q.project_id
  WHERE wq.worker_id = w.id AND p.org_id = $1 AND ($2::uuid IS NULL OR q.project_id = $2)
) mine ON mine.queues IS NOT NULL
WHERE ($3::worker_status IS NULL OR w.status = $3)
  AND ($4::timestamptz IS NULL OR (w.started_at, w.id) < ($4, $5::uuid))
ORDER BY w.started_at DESC, w.id DESC
LIMIT $6
"""


async def list_workers(
    conn: Conn,
    org_id: UUID,
    *,
    project_id: UUID | None,
    status: WorkerStatus | None,
    limit: int,
    after: tuple[datetime, UUID] | None,
) -> list[WorkerPublic]:
    rows = await conn.fetch(
        _WORKERS_SQL,
        org_id,
        project_id,
        None if status is None else status.value,
        None if after is None else after[0],
        None if after is None else after[1],
        limit,
    )
    return [
        WorkerPublic(
            id=r["id"],
            hostname=r["hostname"],
            pid=r["pid"],
            version=r["version"],
            status=r["status"],
            capacity=r["capacity"],
            in_flight=r["in_flight"],
            started_at=r["started_at"],
            stopped_at=r["stopped_at"],
            last_heartbeat_at=r["last_heartbeat_at"],
            uptime_s=round(max(0.0, float(r["uptime_s"])), 3),
            heartbeat_age_s=round(max(0.0, float(r["heartbeat_age_s"])), 3),
            queues=[WorkerQueue.model_validate(q) for q in r["queues"]],
        )
        for r in rows
    ]
