"""Cron schedules of a project."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from codity.api.resource_errors import ScheduleNotFoundError
from codity.api.schemas.schedules import SchedulePublic
from codity.core import Conn

_SELECT = """
SELECT s.id, s.queue_id, q.name AS queue_name, s.name, s.cron_expression, s.timezone, s.handler,
       s.payload, s.priority, s.enabled, s.next_run_at, s.last_run_at, s.last_job_id,
       s.created_at, s.updated_at
FROM scheduled_jobs s JOIN queues q ON q.id = s.queue_id
WHERE q.project_id = $1
"""


async def list_schedules(
    conn: Conn, project_id: UUID, *, limit: int, after: tuple[datetime, UUID] | None
) -> list[SchedulePublic]:
    """Ordered by (created_at, id): a stable keyset even when names repeat across queues."""
    rows = await conn.fetch(
        _SELECT
        + " AND ($2::timestamptz IS NULL OR (s.created_at, s.id) > ($2, $3::uuid))"
        + " ORDER BY s.created_at, s.id LIMIT $4",
        project_id,
        None if after is None else after[0],
        None if after is None else after[1],
        limit,
    )
    return [SchedulePublic.model_validate(dict(r)) for r in rows]


async def get_schedule(conn: Conn, project_id: UUID, schedule_id: UUID) -> SchedulePublic:
    row = await conn.fetchrow(_SELECT + " AND s.id = $2", project_id, schedule_id)
    if row is None:
        raise ScheduleNotFoundError(f"no schedule {schedule_id} in this project")
    return SchedulePublic.model_validate(dict(row))
