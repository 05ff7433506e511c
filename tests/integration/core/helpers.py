"""Small helpers for the core integration tests."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from tests.factories import make_worker


async def job_row(db: asyncpg.Connection[Any], job_id: int) -> asyncpg.Record:
    return await db.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id)


async def expire_leases(db: asyncpg.Connection[Any], *job_ids: int) -> None:
    """Make leases look expired without sleeping (the reaper compares with now())."""
    await db.execute(
        "UPDATE jobs SET lock_expires_at = now() - interval '1 second' WHERE id = ANY($1::bigint[])",
        list(job_ids),
    )


async def executions(db: asyncpg.Connection[Any], job_id: int) -> list[asyncpg.Record]:
    return await db.fetch(
        "SELECT * FROM job_executions WHERE job_id = $1 ORDER BY execution_seq", job_id
    )


async def new_worker(db: asyncpg.Connection[Any]) -> uuid.UUID:
    return await make_worker(db, hostname="h")
