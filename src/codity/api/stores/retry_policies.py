"""Retry policies of a project. SQL: `db/sql/api_retry_policies.sql`."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from codity.api.schemas.retry_policies import RetryPolicyCreate, RetryPolicyPublic
from codity.api.stores._constraints import constraint_errors
from codity.core import Conn
from codity.db.queries import Fragments, bind
from codity.domain.errors import RetryPolicyNotFoundError

#: Columns a PATCH may set (api_retry_policies_update changes exactly the ones in `fields`).
UPDATABLE = ("name", "strategy", "base_delay_ms", "max_delay_ms", "max_attempts", "jitter")


def _not_found(policy_id: UUID) -> RetryPolicyNotFoundError:
    return RetryPolicyNotFoundError(f"no retry policy {policy_id} in this project")


async def list_retry_policies(
    conn: Conn, project_id: UUID, *, limit: int, after_name: str | None
) -> list[RetryPolicyPublic]:
    where = Fragments()
    if after_name is not None:
        where.add("api_retry_policies_after", after_name=after_name)
    q = where.bind("api_retry_policies_list", project_id=project_id, limit=limit)
    return [RetryPolicyPublic.model_validate(dict(r)) for r in await q.fetch(conn)]


async def get_retry_policy(conn: Conn, project_id: UUID, policy_id: UUID) -> RetryPolicyPublic:
    q = bind(
        "api_retry_policies_list",
        "api_retry_policies_when_id",
        project_id=project_id,
        policy_id=policy_id,
        limit=1,
    )
    row = await q.fetchrow(conn)
    if row is None:
        raise _not_found(policy_id)
    return RetryPolicyPublic.model_validate(dict(row))


async def require_in_project(conn: Conn, project_id: UUID, policy_id: UUID | None) -> None:
    """A queue or a job may only name a retry policy of its own project."""
    if policy_id is None:
        return
    q = bind("api_retry_policies_exists", project_id=project_id, policy_id=policy_id)
    if not await q.fetchval(conn):
        raise _not_found(policy_id)


async def create_retry_policy(conn: Conn, project_id: UUID, body: RetryPolicyCreate) -> UUID:
    q = bind(
        "api_retry_policies_insert",
        project_id=project_id,
        name=body.name,
        strategy=body.strategy.value,
        base_delay_ms=body.base_delay_ms,
        max_delay_ms=body.max_delay_ms,
        max_attempts=body.max_attempts,
        jitter=body.jitter,
    )
    async with constraint_errors("retry policy"):
        policy_id: UUID = await q.fetchval(conn)
    return policy_id


async def update_retry_policy(
    conn: Conn, project_id: UUID, policy_id: UUID, changes: dict[str, Any]
) -> None:
    values = {n: getattr(changes.get(n), "value", changes.get(n)) for n in UPDATABLE}
    q = bind(
        "api_retry_policies_update",
        project_id=project_id,
        policy_id=policy_id,
        fields=[n for n in UPDATABLE if n in changes],
        **values,
    )
    async with constraint_errors("retry policy"):
        found = await q.fetchval(conn)
    if found is None:
        raise _not_found(policy_id)


async def delete_retry_policy(conn: Conn, project_id: UUID, policy_id: UUID) -> None:
    """Queues and jobs naming the policy fall back to their defaults (FK is SET NULL)."""
    q = bind("api_retry_policies_delete", project_id=project_id, policy_id=policy_id)
    if await q.fetchval(conn) is None:
        raise _not_found(policy_id)
