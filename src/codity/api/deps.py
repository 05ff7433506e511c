"""FastAPI dependencies as `Annotated` aliases: what a handler declares to get the pool, the
settings, the caller, or the checked project.

    async def list_queues(ctx: ProjectScope, pool: DbPool) -> QueuesPage: ...

`ProjectScope` is only available on PROJECT-scoped routes: the guard that `mount_routes`
attaches checks the project against the caller's organisation and leaves the result on the
request; a handler asking for it on a route without the guard fails closed (500) rather than
running unchecked.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

import asyncpg
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from codity.api.principal import Principal, ProjectContext
from codity.api.security import authenticate
from codity.settings import Settings

__all__ = [
    "AppSettings",
    "CurrentPrincipal",
    "DbPool",
    "PoolType",
    "Principal",
    "ProjectContext",
    "ProjectScope",
    "get_pool",
    "get_principal",
    "get_project_context",
    "get_settings",
]

# Per-request values live in the ASGI scope, which is this request's own. (`request.state` is
# seeded from the lifespan state and may be shared between requests.)
PRINCIPAL_SCOPE_KEY = "codity.principal"
PROJECT_SCOPE_KEY = "codity.project_context"

#: Documents `Authorization: Bearer ...` in OpenAPI; parsing and errors are ours (the envelope).
bearer_scheme = HTTPBearer(
    auto_error=False,
    bearerFormat="JWT or API key",
    description="An access token from /auth/login, or a project API key (cdy_...).",
)


# FastAPI evaluates annotations at run time, where asyncpg.Pool is not subscriptable.
if TYPE_CHECKING:
    PoolType: TypeAlias = asyncpg.Pool[Any]
else:
    PoolType = asyncpg.Pool


def get_pool(request: Request) -> PoolType:
    pool: PoolType = request.app.state.pool
    return pool


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


DbPool = Annotated[PoolType, Depends(get_pool)]
AppSettings = Annotated[Settings, Depends(get_settings)]


async def get_principal(
    request: Request,
    pool: DbPool,
    settings: AppSettings,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Principal:
    cached: Principal | None = request.scope.get(PRINCIPAL_SCOPE_KEY)
    if cached is not None:
        return cached
    principal = await authenticate(pool, settings, request.headers.get("authorization"))
    request.scope[PRINCIPAL_SCOPE_KEY] = principal
    return principal


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


def get_project_context(request: Request, project_id: uuid.UUID) -> ProjectContext:
    # `project_id` is declared so that FastAPI skips this dependency when the path's id is not
    # a UUID (the request then answers 422) instead of calling it without a checked context.
    context: ProjectContext | None = request.scope.get(PROJECT_SCOPE_KEY)
    if context is None or context.project_id != project_id:
        # A handler asked for ProjectScope on a route mounted without the guard: refuse to run.
        raise RuntimeError("ProjectScope used on a route that is not PROJECT-scoped")
    return context


ProjectScope = Annotated[ProjectContext, Depends(get_project_context)]
