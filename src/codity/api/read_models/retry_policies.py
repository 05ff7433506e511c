"""Retry policies of a project, with how many queues use each."""

from __future__ import annotations

from uuid import UUID

from codity.api.resource_errors import RetryPolicyNotFoundError
from codity.api.schemas.retry_policies import RetryPolicyPublic
from codity.core import Conn

_SELECT = """
SELECT rp.id, rp.project_id, rp.name, rp.strategy::text AS strategy, rp.base_delay_ms,
       rp.max_delay_ms, rp.max_attempts, rp.jitter, rp.created_at,
       (SELECT count(*) FROM queues q WHERE q.retry_policy_id = rp.id) AS queue_count
FROM retry_policies rp
WHERE rp.project_id = $1
"""


async def list_retry_policies(
    conn: Conn, project_id: UUID, *, limit: int, after_name: str | None
) -> list[RetryPolicyPublic]:
    rows = await conn.fetch(
        _SELECT + " AND ($2::text IS NULL OR rp.name > $2) ORDER BY rp.name LIMIT $3",
        project_id,
        after_name,
        limit,
    )
    return [RetryPolicyPublic.model_validate(dict(r)) for r in rows]


async def get_retry_policy(conn: Conn, project_id: UUID, policy_id: UUID) -> RetryPolicyPublic:
    row = await conn.fetchrow(_SELECT + " AND rp.id = $2", project_id, policy_id)
    if row is None:
        raise RetryPolicyNotFoundError(f"no retry policy {policy_id} in this project")
    return RetryPolicyPublic.model_validate(dict(row))
