"""Rows the tests need, inserted with plain SQL so fixtures do not depend on the code under test."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg


@dataclass(frozen=True)
class Tenant:
    org_id: uuid.UUID
    project_id: uuid.UUID


async def make_tenant(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any], slug: str | None = None
) -> Tenant:
    slug = slug or f"org-{uuid.uuid4().hex[:8]}"
    org_id = await conn.fetchval(
        "INSERT INTO organizations (name, slug) VALUES ($1, $1) RETURNING id", slug
    )
    project_id = await conn.fetchval(
        "INSERT INTO projects (org_id, name, slug) VALUES ($1, 'Default', 'default') RETURNING id",
        org_id,
    )
    return Tenant(org_id=org_id, project_id=project_id)


async def make_retry_policy(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    project_id: uuid.UUID,
    *,
    strategy: str = "exponential",
    base_delay_ms: int = 1000,
    max_delay_ms: int = 60_000,
    max_attempts: int = 3,
    jitter: bool = True,
) -> uuid.UUID:
    return await conn.fetchval(  # type: ignore[no-any-return]
        """INSERT INTO retry_policies (project_id, name, strategy, base_delay_ms, max_delay_ms, max_attempts, jitter)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id""",
        project_id,
        f"policy-{uuid.uuid4().hex[:6]}",
        strategy,
        base_delay_ms,
        max_delay_ms,
        max_attempts,
        jitter,
    )


async def make_queue(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    project_id: uuid.UUID | None = None,
    *,
    name: str | None = None,
    concurrency_limit: int | None = None,
    is_paused: bool = False,
    retry_policy_id: uuid.UUID | None = None,
    default_max_attempts: int = 3,
    default_timeout_ms: int | None = None,
) -> uuid.UUID:
    if project_id is None:
        project_id = (await make_tenant(conn)).project_id
    return await conn.fetchval(  # type: ignore[no-any-return]
        """INSERT INTO queues (project_id, name, concurrency_limit, is_paused, retry_policy_id,
                               default_max_attempts, default_timeout_ms)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id""",
        project_id,
        name or f"q-{uuid.uuid4().hex[:8]}",
        concurrency_limit,
        is_paused,
        retry_policy_id,
        default_max_attempts,
        default_timeout_ms,
    )


async def make_worker(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any], hostname: str = "test-host"
) -> uuid.UUID:
    return await conn.fetchval(  # type: ignore[no-any-return]
        "INSERT INTO workers (hostname, pid, version, capacity) VALUES ($1, 1, 'test', 10) RETURNING id",
        hostname,
    )


async def make_finished_attempt(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    queue_id: uuid.UUID,
    *,
    handler: str = "noop",
    run_at: Any,
    started_at: Any,
    finished_at: Any,
    status: str = "completed",
    worker_id: uuid.UUID | None = None,
    payload: Any = None,
    error: str | None = None,
) -> int:
    """A job that ran one attempt and ended (`status`: completed, or failed -> dead_letter),
    with its execution row: history as the worker leaves it, for the rollups and the reads."""
    job_status = "completed" if status == "completed" else "dead_letter"
    job_id: int = await conn.fetchval(
        """INSERT INTO jobs (queue_id, handler, payload, status, run_at, attempt, max_attempts,
                             execution_seq, worker_id, claimed_at, started_at, finished_at,
                             created_at, last_error)
           VALUES ($1, $2, $3, $4, $5, 1, 1, 1, $6, $7, $7, $8, $5, $9) RETURNING id""",
        queue_id,
        handler,
        payload if payload is not None else {},
        job_status,
        run_at,
        worker_id,
        started_at,
        finished_at,
        error,
    )
    await conn.execute(
        """INSERT INTO job_executions (job_id, queue_id, execution_seq, attempt, worker_id, status,
                                       claimed_at, started_at, finished_at, error)
           VALUES ($1, $2, 1, 1, $3, $4, $5, $5, $6, $7)""",
        job_id,
        queue_id,
        worker_id,
        status,
        started_at,
        finished_at,
        error,
    )
    return job_id
