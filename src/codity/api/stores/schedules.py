"""Cron schedules of a project. SQL: `db/sql/api_schedules.sql`.

`next_run_at` is always computed here from *now* (never from a stored value), so re-enabling a
schedule after a week off fires at the next occurrence, not a week of backlog.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import asyncpg

from codity.api.schemas.schedules import SchedulePublic
from codity.api.stores._constraints import constraint_errors
from codity.core import Conn
from codity.db.queries import Fragments, bind
from codity.domain.cron import next_fire_time
from codity.domain.errors import QueueNotFoundError, ScheduleNotFoundError

#: Columns a change may set (api_schedules_update changes exactly the ones in `fields`).
UPDATABLE = ("name", "cron_expression", "timezone", "handler", "payload", "priority", "enabled")


def _not_found(schedule_id: UUID) -> ScheduleNotFoundError:
    return ScheduleNotFoundError(f"no schedule {schedule_id} in this project")


async def list_schedules(
    conn: Conn, project_id: UUID, *, limit: int, after: tuple[datetime, UUID] | None
) -> list[SchedulePublic]:
    """Ordered by (created_at, id): a stable keyset even when names repeat across queues."""
    where = Fragments()
    if after is not None:
        where.add("api_schedules_after", after_created_at=after[0], after_id=after[1])
    q = where.bind("api_schedules_list", project_id=project_id, limit=limit)
    return [SchedulePublic.model_validate(dict(r)) for r in await q.fetch(conn)]


async def get_schedule(conn: Conn, project_id: UUID, schedule_id: UUID) -> SchedulePublic:
    q = bind(
        "api_schedules_list",
        "api_schedules_when_id",
        project_id=project_id,
        schedule_id=schedule_id,
        limit=1,
    )
    row = await q.fetchrow(conn)
    if row is None:
        raise _not_found(schedule_id)
    return SchedulePublic.model_validate(dict(row))


async def create_schedule(
    conn: Conn,
    project_id: UUID,
    *,
    queue_id: UUID,
    name: str,
    cron_expression: str,
    timezone: str,
    handler: str,
    payload: Any,
    priority: int,
    enabled: bool,
    created_by: UUID | None,
) -> UUID:
    """Into one of the project's queues only (another project's queue: QueueNotFoundError)."""
    q = bind(
        "api_schedules_insert",
        project_id=project_id,
        queue_id=queue_id,
        name=name,
        cron_expression=cron_expression,
        timezone=timezone,
        handler=handler,
        payload=payload,
        priority=priority,
        enabled=enabled,
        next_run_at=next_fire_time(cron_expression, timezone, datetime.now(UTC)),
        created_by=created_by,
    )
    async with constraint_errors("schedule"):
        schedule_id: UUID | None = await q.fetchval(conn)
    if schedule_id is None:
        raise QueueNotFoundError(f"no queue {queue_id} in this project")
    return schedule_id


async def update_schedule(
    conn: asyncpg.Connection[Any], project_id: UUID, schedule_id: UUID, changes: dict[str, Any]
) -> None:
    """Apply `changes`; the next fire time is recomputed whenever timing or `enabled` changes."""
    ids = {"project_id": project_id, "schedule_id": schedule_id}
    async with conn.transaction():
        lock = bind("api_schedules_lock", **ids)
        current = await lock.fetchrow(conn)
        if current is None:
            raise _not_found(schedule_id)
        fields = [name for name in UPDATABLE if name in changes]
        next_run_at = None
        if {"cron_expression", "timezone", "enabled"} & set(changes):
            fields.append("next_run_at")
            next_run_at = next_fire_time(
                changes.get("cron_expression", current["cron_expression"]),
                changes.get("timezone", current["timezone"]),
                datetime.now(UTC),
            )
        q = bind(
            "api_schedules_update",
            **ids,
            fields=fields,
            next_run_at=next_run_at,
            **{name: changes.get(name) for name in UPDATABLE},
        )
        async with constraint_errors("schedule"):
            await q.execute(conn)


async def delete_schedule(conn: Conn, project_id: UUID, schedule_id: UUID) -> None:
    q = bind("api_schedules_delete", project_id=project_id, schedule_id=schedule_id)
    if await q.fetchval(conn) is None:
        raise _not_found(schedule_id)


async def record_manual_run(conn: Conn, project_id: UUID, schedule_id: UUID, job_id: int) -> None:
    q = bind(
        "api_schedules_record_manual_run",
        project_id=project_id,
        schedule_id=schedule_id,
        job_id=job_id,
    )
    await q.execute(conn)
