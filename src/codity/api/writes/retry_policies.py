"""Create, change and delete retry policies."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from codity.api.resource_errors import RetryPolicyNotFoundError
from codity.api.schemas.retry_policies import RetryPolicyCreate
from codity.api.writes.db_errors import constraint_errors
from codity.core import Conn

#: Columns a PATCH may set: the only names ever spliced into the UPDATE text.
UPDATABLE = ("name", "strategy", "base_delay_ms", "max_delay_ms", "max_attempts", "jitter")


async def create_retry_policy(conn: Conn, project_id: UUID, body: RetryPolicyCreate) -> UUID:
    async with constraint_errors("retry policy"):
        policy_id: UUID = await conn.fetchval(
            """INSERT INTO retry_policies
                 (project_id, name, strategy, base_delay_ms, max_delay_ms, max_attempts, jitter)
               VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id""",
            project_id,
            body.name,
            body.strategy.value,
            body.base_delay_ms,
            body.max_delay_ms,
            body.max_attempts,
            body.jitter,
        )
    return policy_id


async def update_retry_policy(
    conn: Conn, project_id: UUID, policy_id: UUID, changes: dict[str, Any]
) -> None:
    sets = [name for name in UPDATABLE if name in changes]
    values = [getattr(changes[n], "value", changes[n]) for n in sets]
    assignments = ", ".join(f"{name} = ${i + 3}" for i, name in enumerate(sets)) or "name = name"
    async with constraint_errors("retry policy"):
        found = await conn.fetchval(
            f"UPDATE retry_policies SET {assignments} WHERE project_id = $1 AND id = $2 RETURNING id",
            project_id,
            policy_id,
            *values,
        )
    if found is None:
        raise RetryPolicyNotFoundError(f"no retry policy {policy_id} in this project")


async def delete_retry_policy(conn: Conn, project_id: UUID, policy_id: UUID) -> None:
    """Queues and jobs naming the policy fall back to their defaults (FK is SET NULL)."""
    found = await conn.fetchval(
        "DELETE FROM retry_policies WHERE project_id = $1 AND id = $2 RETURNING id",
        project_id,
        policy_id,
    )
    if found is None:
        raise RetryPolicyNotFoundError(f"no retry policy {policy_id} in this project")
