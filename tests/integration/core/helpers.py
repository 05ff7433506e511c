"""Small helpers for the core integration tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable
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


async def rewrite_function(
    conn: asyncpg.Pool[Any] | asyncpg.Connection[Any], name: str, rewrite: Callable[[str], str]
) -> None:
    """Replace a function of this test's own database with a rewritten copy (a break-it twin)."""
    definition = await conn.fetchval(
        "SELECT pg_get_functiondef(oid) FROM pg_proc WHERE proname = $1", name
    )
    broken = rewrite(definition)
    assert broken != definition
    await conn.execute(broken)


def replaced(text: str, old: str, new: str) -> str:
    """`text` with `old` (which must be there, once) replaced: a broken copy that did not
    break anything would pass its twin for the wrong reason."""
    assert text.count(old) == 1, f"not found once: {old!r}"
    return text.replace(old, new)
