"""Rows the tests need, inserted with plain SQL so fixtures do not depend on the code under test."""

from __future__ import annotations

import os
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
    priority: int = 0,
    key_concurrency_limit: int | None = None,
    rate_limit: tuple[int, int] | None = None,  # (count, period in ms)
    rate_limit_per_key: bool = False,
) -> uuid.UUID:
    if project_id is None:
        project_id = (await make_tenant(conn)).project_id
    return await conn.fetchval(  # type: ignore[no-any-return]
        """INSERT INTO queues (project_id, name, concurrency_limit, is_paused, retry_policy_id,
                               default_max_attempts, default_timeout_ms, priority,
                               key_concurrency_limit, rate_limit_count, rate_limit_period_ms,
                               rate_limit_per_key)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id""",
        project_id,
        name or f"q-{uuid.uuid4().hex[:8]}",
        concurrency_limit,
        is_paused,
        retry_policy_id,
        default_max_attempts,
        default_timeout_ms,
        priority,
        key_concurrency_limit,
        rate_limit[0] if rate_limit else None,
        rate_limit[1] if rate_limit else None,
        rate_limit_per_key,
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


async def make_project(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    org_id: uuid.UUID,
    slug: str | None = None,
    *,
    weight: int = 1,
) -> uuid.UUID:
    """Another project in an existing organisation."""
    slug = slug or f"p-{uuid.uuid4().hex[:8]}"
    return await conn.fetchval(  # type: ignore[no-any-return]
        "INSERT INTO projects (org_id, name, slug, weight) VALUES ($1, $2, $2, $3) RETURNING id",
        org_id,
        slug,
        weight,
    )


async def make_user(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    email: str | None = None,
    *,
    password_hash: str = "unused",
    display_name: str | None = None,
    verified: bool = True,
) -> uuid.UUID:
    """A user row. `password_hash` is stored as given: pass a real argon2 hash to sign in.
    `verified`: the email address is confirmed (an unverified account cannot sign in)."""
    return await conn.fetchval(  # type: ignore[no-any-return]
        """INSERT INTO users (email, password_hash, display_name, email_verified_at)
           VALUES ($1, $2, $3, CASE WHEN $4 THEN now() END) RETURNING id""",
        email or f"user-{uuid.uuid4().hex[:8]}@example.test",
        password_hash,
        display_name,
        verified,
    )


async def make_membership(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    org_id: uuid.UUID,
    user_id: uuid.UUID,
    role: str = "member",
) -> None:
    await conn.execute(
        "INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)",
        org_id,
        user_id,
        str(role),
    )


async def make_job(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    queue_id: uuid.UUID,
    *,
    handler: str = "h",
    status: str = "queued",
    payload: Any = None,
    max_attempts: int = 3,
    attempt: int = 0,
    idempotency_key: str | None = None,
    worker_id: uuid.UUID | None = None,
    leased: bool = False,
    retry_policy_id: uuid.UUID | None = None,
    schedule_id: uuid.UUID | None = None,
) -> int:
    """A job row as it sits in a status, written directly (not through core.enqueue): for the
    schema's promises, reads and isolation tests that need a row, not the enqueue path.
    `leased`: a lease running 30 s from now."""
    return await conn.fetchval(  # type: ignore[no-any-return]
        """INSERT INTO jobs (queue_id, handler, payload, status, max_attempts, attempt,
                             idempotency_key, worker_id, lock_expires_at, retry_policy_id,
                             schedule_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                   CASE WHEN $9 THEN now() + interval '30 seconds' END, $10, $11)
           RETURNING id""",
        queue_id,
        handler,
        payload if payload is not None else {},
        status,
        max_attempts,
        attempt,
        idempotency_key,
        worker_id,
        leased,
        retry_policy_id,
        schedule_id,
    )


async def make_jobs(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    queue_id: uuid.UUID,
    n: int,
    *,
    handler: str = "h",
    status: str = "queued",
    payload: Any = None,
    last_error: str | None = None,
) -> list[int]:
    """`n` job rows in one status (not a leased one), in one INSERT: for bulk actions and
    reads at volume. The payload gets `"i": <position>` merged in."""
    rows = await conn.fetch(
        """INSERT INTO jobs (queue_id, handler, payload, status, max_attempts, last_error,
                             finished_at)
           SELECT $1, $2, $3::jsonb || jsonb_build_object('i', i), $4::job_status, 3, $5,
                  CASE WHEN $4 IN ('completed', 'cancelled', 'dead_letter', 'failed')
                       THEN now() END
           FROM generate_series(1, $6::int) AS i
           ORDER BY i
           RETURNING id""",
        queue_id,
        handler,
        payload if payload is not None else {},
        status,
        last_error,
        n,
    )
    return [r["id"] for r in rows]


async def make_bulk_action(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    project_id: uuid.UUID,
    *,
    job_ids: list[int],
    action: str = "cancel",
    status: str = "completed",
    owner: str | None = None,
) -> uuid.UUID:
    """A bulk action over listed jobs, already in `status` (by default finished, so the API's
    runner leaves it alone); a running one is held by `owner`, its heartbeat fresh."""
    return await conn.fetchval(  # type: ignore[no-any-return]
        """INSERT INTO bulk_actions (project_id, target, action, ids, matched, status, owner,
                                     heartbeat_at, finished_at)
           VALUES ($1, 'jobs', $2, $3, $4, $5, $6::text, CASE WHEN $6::text IS NOT NULL THEN now() END,
                   CASE WHEN $5 IN ('completed', 'stopped', 'failed') THEN now() END)
           RETURNING id""",
        project_id,
        action,
        job_ids,
        len(job_ids),
        status,
        owner,
    )


async def make_schedule(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    queue_id: uuid.UUID,
    *,
    next_run_at: Any,
    name: str | None = None,
    cron: str = "* * * * *",
    handler: str = "noop",
    payload: Any = None,
    enabled: bool = True,
) -> uuid.UUID:
    return await conn.fetchval(  # type: ignore[no-any-return]
        """INSERT INTO scheduled_jobs (queue_id, name, cron_expression, handler, payload, enabled,
                                       next_run_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id""",
        queue_id,
        name or f"s-{uuid.uuid4().hex[:8]}",
        cron,
        handler,
        payload if payload is not None else {},
        enabled,
        next_run_at,
    )


async def make_dead_letter(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    queue_id: uuid.UUID,
    *,
    handler: str = "noop",
    payload: Any = None,
    error: str = "boom",
    attempts: int = 3,
    job_id: int | None = None,
) -> uuid.UUID:
    """A dead-letter copy (with or without its job row, as after a purge)."""
    return await conn.fetchval(  # type: ignore[no-any-return]
        """INSERT INTO dead_letter_jobs (job_id, queue_id, handler, payload, error, attempts)
           VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
        job_id,
        queue_id,
        handler,
        payload if payload is not None else {},
        error,
        attempts,
    )


async def make_execution(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    job_id: int,
    queue_id: uuid.UUID,
    *,
    status: str = "completed",
    execution_seq: int = 1,
    attempt: int = 1,
    worker_id: uuid.UUID | None = None,
    started_at: Any = None,
    finished_at: Any = None,
) -> None:
    """An attempt's execution row (finished_at defaults to now)."""
    await conn.execute(
        """INSERT INTO job_executions (job_id, queue_id, execution_seq, attempt, worker_id, status,
                                       started_at, finished_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, now()))""",
        job_id,
        queue_id,
        execution_seq,
        attempt,
        worker_id,
        status,
        started_at,
        finished_at,
    )


async def make_api_key(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    project_id: uuid.UUID,
    *,
    name: str | None = None,
    prefix: str = "cdy_xxxxxxxx",
    key_hash: bytes | None = None,
    role: str = "member",
    expires_in_days: int = 90,
) -> uuid.UUID:
    """An API key row whose secret nobody knows (a random hash): for ownership and isolation.
    Every key expires (API_KEY_TTL_DAYS' default unless told)."""
    return await conn.fetchval(  # type: ignore[no-any-return]
        """INSERT INTO api_keys (project_id, name, prefix, key_hash, role, expires_at)
           VALUES ($1, $2, $3, $4, $5, now() + make_interval(days => $6)) RETURNING id""",
        project_id,
        name or f"k-{uuid.uuid4().hex[:8]}",
        prefix,
        key_hash if key_hash is not None else os.urandom(32),
        role,
        expires_in_days,
    )


async def make_job_log(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    job_id: int,
    *,
    execution_seq: int = 1,
    level: str = "info",
    message: str = "hi",
    fields: dict[str, Any] | None = None,
) -> None:
    await conn.execute(
        "INSERT INTO job_logs (job_id, execution_seq, level, message, fields)"
        " VALUES ($1, $2, $3, $4, $5)",
        job_id,
        execution_seq,
        level,
        message,
        fields or {},
    )


async def make_rollup_state(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any], done_until: Any, name: str = "minute"
) -> None:
    """Where the stats rollup starts: minutes before `done_until` count as already rolled up."""
    await conn.execute(
        "INSERT INTO stats_rollup_state (name, done_until) VALUES ($1, $2)", name, done_until
    )


async def project_of(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any], queue_id: uuid.UUID
) -> uuid.UUID:
    """The project a queue belongs to (core operations on jobs, queues and dead letters take it)."""
    return await conn.fetchval("SELECT project_id FROM queues WHERE id = $1", queue_id)  # type: ignore[no-any-return]


async def make_invitation(
    conn: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    org_id: uuid.UUID,
    *,
    email: str | None = None,
    role: str = "member",
    token_hash: bytes | None = None,
    expires_in_days: int = 7,
) -> uuid.UUID:
    """An open invitation (its token unknown unless `token_hash` is given)."""
    return await conn.fetchval(  # type: ignore[no-any-return]
        """INSERT INTO invitations (org_id, email, role, token_hash, expires_at)
           VALUES ($1, $2, $3, $4, now() + make_interval(days => $5)) RETURNING id""",
        org_id,
        email or f"invited-{uuid.uuid4().hex[:8]}@example.test",
        role,
        token_hash if token_hash is not None else os.urandom(32),
        expires_in_days,
    )
