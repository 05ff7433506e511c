"""Create, change, enable/disable and delete cron schedules.

`next_run_at` is always computed here from *now* (never from a stored value), so re-enabling a
schedule after a week off fires at the next occurrence, not a week of backlog.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import asyncpg

from codity.api.resource_errors import ScheduleNotFoundError
from codity.api.writes.db_errors import constraint_errors
from codity.core import Conn
from codity.domain.cron import next_fire_time

#: Columns a PATCH may set: the only names ever spliced into the UPDATE text.
UPDATABLE = ("name", "cron_expression", "timezone", "handler", "payload", "priority", "enabled")


async def create_schedule(
    conn: Conn,
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
    next_run_at = next_fire_time(cron_expression, timezone, datetime.now(UTC))
    async with constraint_errors("schedule"):
        schedule_id: UUID = await conn.fetchval(
            """INSERT INTO scheduled_jobs (queue_id, name, cron_expression, timezone, handler,
                                           payload, priority, enabled, next_run_at, created_by)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id""",
            queue_id,
            name,
            cron_expression,
            timezone,
            handler,
            payload,
            priority,
            enabled,
            next_run_at,
            created_by,
        )
    return schedule_id


async def update_schedule(
    conn: asyncpg.Connection[Any], project_id: UUID, schedule_id: UUID, changes: dict[str, Any]
) -> None:
    """Apply `changes`; the next fire time is recomputed whenever timing or `enabled` changes."""
    async with conn.transaction():
        current = await conn.fetchrow(
            """SELECT s.cron_expression, s.timezone FROM scheduled_jobs s
               JOIN queues q ON q.id = s.queue_id
               WHERE q.project_id = $1 AND s.id = $2 FOR UPDATE OF s""",
            project_id,
            schedule_id,
        )
        if current is None:
            raise ScheduleNotFoundError(f"no schedule {schedule_id} in this project")
        sets = [name for name in UPDATABLE if name in changes]
        values = [changes[n] for n in sets]
        if {"cron_expression", "timezone", "enabled"} & set(changes):
            sets.append("next_run_at")
            values.append(
                next_fire_time(
                    changes.get("cron_expression", current["cron_expression"]),
                    changes.get("timezone", current["timezone"]),
                    datetime.now(UTC),
                )
            )
        assignments = "".join(f", {name} = ${i + 2}" for i, name in enumerate(sets))
        async with constraint_errors("schedule"):
            await conn.execute(
                f"UPDATE scheduled_jobs SET updated_at = now(){assignments} WHERE id = $1",
                schedule_id,
                *values,
            )


async def delete_schedule(conn: Conn, project_id: UUID, schedule_id: UUID) -> None:
    found = await conn.fetchval(
        """DELETE FROM scheduled_jobs s USING queues q
           WHERE q.id = s.queue_id AND q.project_id = $1 AND s.id = $2 RETURNING s.id""",
        project_id,
        schedule_id,
    )
    if found is None:
        raise ScheduleNotFoundError(f"no schedule {schedule_id} in this project")


async def record_manual_run(conn: Conn, schedule_id: UUID, job_id: int) -> None:
    await conn.execute(
        "UPDATE scheduled_jobs SET last_run_at = now(), last_job_id = $2 WHERE id = $1",
        schedule_id,
        job_id,
    )
