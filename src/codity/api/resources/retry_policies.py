"""/projects/{project_id}/retry-policies: list, create, change, delete."""

from __future__ import annotations

from fastapi import Response

from codity.api.deps import DbPool, ProjectScope
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.resources._params import RetryPolicyId
from codity.api.resources._project_audit import atomic, audit
from codity.api.routing import Route, Scope
from codity.api.schemas.common import DEFAULT_PAGE_SIZE
from codity.api.schemas.retry_policies import (
    RetryPoliciesPage,
    RetryPolicyCreate,
    RetryPolicyPublic,
    RetryPolicyUpdate,
)
from codity.api.stores import retry_policies as store
from codity.domain.errors import ValidationError
from codity.domain.states import MemberRole

TAG = "retry-policies"
BASE = "/projects/{project_id}/retry-policies"


async def list_policies(
    ctx: ProjectScope, pool: DbPool, limit: Limit = DEFAULT_PAGE_SIZE, cursor: Cursor = None
) -> RetryPoliciesPage:
    after = decode_cursor(cursor, str)
    items = await store.list_retry_policies(
        pool, ctx.project_id, limit=limit, after_name=after[0] if after else None
    )
    return RetryPoliciesPage(
        items=items, next_cursor=next_cursor(items, limit, lambda p: (p.name,))
    )


async def create_policy(
    ctx: ProjectScope, pool: DbPool, body: RetryPolicyCreate
) -> RetryPolicyPublic:
    async with atomic(pool) as conn:
        policy_id = await store.create_retry_policy(conn, ctx.project_id, body)
        await audit(conn, ctx, "retry_policy.create", "retry_policy", policy_id, name=body.name)
    return await store.get_retry_policy(pool, ctx.project_id, policy_id)


async def read_policy(
    ctx: ProjectScope, pool: DbPool, policy_id: RetryPolicyId
) -> RetryPolicyPublic:
    return await store.get_retry_policy(pool, ctx.project_id, policy_id)


async def update_policy(
    ctx: ProjectScope, pool: DbPool, policy_id: RetryPolicyId, body: RetryPolicyUpdate
) -> RetryPolicyPublic:
    changes = body.model_dump(exclude_unset=True)
    current = await store.get_retry_policy(pool, ctx.project_id, policy_id)
    base = changes.get("base_delay_ms", current.base_delay_ms)
    if changes.get("max_delay_ms", current.max_delay_ms) < base:
        raise ValidationError("max_delay_ms must be at least base_delay_ms")
    async with atomic(pool) as conn:
        await store.update_retry_policy(conn, ctx.project_id, policy_id, changes)
        await audit(
            conn, ctx, "retry_policy.update", "retry_policy", policy_id, fields=sorted(changes)
        )
    return await store.get_retry_policy(pool, ctx.project_id, policy_id)


async def delete_policy(ctx: ProjectScope, pool: DbPool, policy_id: RetryPolicyId) -> Response:
    async with atomic(pool) as conn:
        await store.delete_retry_policy(conn, ctx.project_id, policy_id)
        await audit(conn, ctx, "retry_policy.delete", "retry_policy", policy_id)
    return Response(status_code=204)


ROUTES: list[Route] = [
    Route(
        "GET",
        BASE,
        list_policies,
        Scope.PROJECT,
        MemberRole.VIEWER,
        "List retry policies",
        response_model=RetryPoliciesPage,
        tags=(TAG,),
    ),
    Route(
        "POST",
        BASE,
        create_policy,
        Scope.PROJECT,
        MemberRole.ADMIN,
        "Create a retry policy",
        response_model=RetryPolicyPublic,
        status_code=201,
        tags=(TAG,),
    ),
    Route(
        "GET",
        BASE + "/{policy_id}",
        read_policy,
        Scope.PROJECT,
        MemberRole.VIEWER,
        "Read a retry policy",
        response_model=RetryPolicyPublic,
        tags=(TAG,),
    ),
    Route(
        "PATCH",
        BASE + "/{policy_id}",
        update_policy,
        Scope.PROJECT,
        MemberRole.ADMIN,
        "Change a retry policy",
        response_model=RetryPolicyPublic,
        tags=(TAG,),
    ),
    Route(
        "DELETE",
        BASE + "/{policy_id}",
        delete_policy,
        Scope.PROJECT,
        MemberRole.ADMIN,
        "Delete a retry policy (queues using it fall back to their defaults)",
        status_code=204,
        tags=(TAG,),
    ),
]
