"""Operator maintenance on a whole database: wipe the schema, un-pause everything.

These back `codity db reset` and `codity db resume`. They act on every project at once, which
is why they live here (the database's own housekeeping) and not in `codity.core`, whose
operations are always scoped to one tenant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

#: Everything codity creates lives in `public`; dropping the schema removes tables, enums,
#: functions, triggers and alembic's bookkeeping in one statement, whatever revision it was at.
DROP_EVERYTHING = "DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public"


async def drop_everything(conn: asyncpg.Connection[Any]) -> None:
    """Remove every table and type; the caller migrates to head afterwards."""
    await conn.execute(DROP_EVERYTHING)


@dataclass(frozen=True)
class Resumed:
    queues: int  # queues that were paused and now are not
    schedules: int  # schedules that were disabled and now are enabled


async def resume_all(conn: asyncpg.Connection[Any]) -> Resumed:
    """Un-pause every queue and enable every schedule, in one transaction."""
    async with conn.transaction():
        queues = await conn.fetch(
            "UPDATE queues SET is_paused = false, updated_at = now() WHERE is_paused RETURNING id"
        )
        schedules = await conn.fetch(
            """UPDATE scheduled_jobs SET enabled = true, updated_at = now()
               WHERE NOT enabled RETURNING id"""
        )
    return Resumed(queues=len(queues), schedules=len(schedules))
