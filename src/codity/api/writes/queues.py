"""Create, change and delete queues (pause and resume go through `codity.core`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from codity.api.resource_errors import QueueBusyError, RetryPolicyNotFoundError
from codity.api.schemas.queues import QueueCreate
from codity.api.writes.db_errors import constraint_errors
from codity.core import Conn
from codity.domain.errors import QueueNotFoundError

#: Columns a PATCH may set: the only names ever spliced into the UPDATE text.
UPDATABLE = (
    "description",
    "priority",
    "concurrency_limit",
    "retry_policy_id",
    "default_max_attempts",
    "default_timeout_ms",
    "rate_limit_per_minute",
)


async def _check_policy(conn: Conn, project_id: UUID, policy_id: UUID | None) -> None:
    """A queue may only name a retry policy of its own project."""
    if policy_id is None:
        return
    if not await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM retry_policies WHERE project_id = $1 AND id = $2)",
        project_id,
        policy_id,
    ):
        raise RetryPolicyNotFoundError(f"no retry policy {policy_id} in this project")


async def create_queue(conn: Conn, project_id: UUID, body: QueueCreate) -> UUID:
    await _check_policy(conn, project_id, body.retry_policy_id)
    async with constraint_errors("queue"):
        queue_id: UUID = await conn.fetchval(
            """INSERT INTO queues (project_id, name, description, priority, concurrency_limit,
                                   retry_policy_id, default_max_attempts, default_timeout_ms,
                                   rate_limit_per_minute)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id""",
            project_id,
            body.name,
            body.description,
            body.priority,
            body.concurrency_limit,
            body.retry_policy_id,
            body.default_max_attempts,
            body.default_timeout_ms,
            body.rate_limit_per_minute,
        )
    return queue_id


async def update_queue(
    conn: Conn, project_id: UUID, queue_id: UUID, changes: dict[str, Any]
) -> None:
    if "retry_policy_id" in changes:
        await _check_policy(conn, project_id, changes["retry_policy_id"])
    sets = [name for name in UPDATABLE if name in changes]
    assignments = "".join(f", {name} = ${i + 3}" for i, name in enumerate(sets))
    async with constraint_errors("queue"):
        found = await conn.fetchval(
            f"UPDATE queues SET updated_at = now(){assignments} "
            "WHERE project_id = $1 AND id = $2 RETURNING id",
            project_id,
            queue_id,
            *(changes[n] for n in sets),
        )
    if found is None:
        raise QueueNotFoundError(f"no queue {queue_id} in this project")


async def delete_queue(conn: asyncpg.Connection[Any], project_id: UUID, queue_id: UUID) -> None:
    """Deletes the queue and its jobs, unless a worker is executing one of them right now.

    The queue row is locked first (concurrency-limited claims lock it too). A claim racing the
    delete on an unlimited queue loses its job to the cascade; the worker's fenced completion
    then matches no row and is reported as a lost lease, which is the protocol's normal path.
    """
    async with conn.transaction():
        found = await conn.fetchval(
            "SELECT id FROM queues WHERE project_id = $1 AND id = $2 FOR UPDATE",
            project_id,
            queue_id,
        )
        if found is None:
            raise QueueNotFoundError(f"no queue {queue_id} in this project")
        busy = await conn.fetchval(
            "SELECT count(*) FROM jobs WHERE queue_id = $1 AND status IN ('claimed', 'running')",
            queue_id,
        )
        if busy:
            raise QueueBusyError(
                f"{busy} job(s) of this queue are being executed; pause the queue and retry "
                "once they finish",
                details={"running": busy},
            )
        await conn.execute("DELETE FROM queues WHERE id = $1", queue_id)
