"""Routes as data: every endpoint is one `Route` entry; `mount_routes` is the only place an
endpoint is registered.

For each entry `mount_routes` assembles the whole chain, in this order:

1. rate limit (by `rate_limit` class), before anything touches a password or a token;
2. authentication (every scope but PUBLIC), giving a `Principal`; USER and ORG scopes also
   require a person (API keys are bound to their project);
3. for PROJECT scope, the tenancy guard `security.assert_project_access` (404 outside the org);
4. the role check against `min_role` (403), after the guard so an outsider learns nothing.

The guard is attached to every PROJECT-scoped entry by construction: there is no way to declare
a project route without it. `unmounted_routes(app)` finds any endpoint registered some other way
(the drift test, and the app's startup, use it).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.params import Depends as DependsParam
from fastapi.routing import APIRoute

from codity.api import ratelimit
from codity.api.deps import PROJECT_SCOPE_KEY, DbPool, get_principal, get_settings
from codity.api.errors import documented_errors
from codity.api.principal import Principal, ProjectContext
from codity.api.request_context import current_client_ip
from codity.api.security import assert_project_access, require_role, require_user
from codity.domain.states import MemberRole
from codity.settings import Settings

API_PREFIX = "/api/v1"
#: Marker stored on every route `mount_routes` registers (also shown in OpenAPI).
SCOPE_EXTENSION = "x-codity-scope"
MIN_ROLE_EXTENSION = "x-codity-min-role"


class Scope(StrEnum):
    PUBLIC = "public"  # no authentication (register, login, refresh)
    USER = "user"  # any signed-in person
    ORG = "org"  # a member of the token's organisation, with `min_role`
    PROJECT = "project"  # `{project_id}` in the path, checked by the guard, with `min_role`


class RateLimitClass(StrEnum):
    AUTH = "auth"  # the per-IP ceiling on authentication calls
    LOGIN = "login"  # AUTH, plus the failed sign-in limits (checked by the login handler)
    ENQUEUE = "enqueue"  # documented only: the handler calls check_enqueue_quota with its count


@dataclass(frozen=True)
class Route:
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: str  # relative to /api/v1, e.g. "/projects/{project_id}/queues/{queue_id}/pause"
    handler: Callable[..., Awaitable[Any]]
    scope: Scope
    min_role: MemberRole | None  # required for ORG/PROJECT scope; None for PUBLIC/USER
    summary: str
    response_model: Any = None
    status_code: int = 200
    rate_limit: RateLimitClass | None = None
    tags: tuple[str, ...] = ()
    #: A non-JSON answer (the event stream): documented with that media type in OpenAPI.
    response_class: Any = None

    @property
    def mutating(self) -> bool:
        return self.method != "GET"

    @property
    def full_path(self) -> str:
        return API_PREFIX + self.path

    def __post_init__(self) -> None:
        needs_role = self.scope in (Scope.ORG, Scope.PROJECT)
        if needs_role != (self.min_role is not None):
            raise ValueError(
                f"{self.method} {self.path}: min_role is required exactly for ORG/PROJECT scope"
            )
        if (self.scope is Scope.PROJECT) != self.path.startswith("/projects/{project_id}"):
            raise ValueError(
                f"{self.method} {self.path}: PROJECT scope means a /projects/{{project_id}} path"
            )


# --- the dependencies mount_routes attaches ---------------------------------------------------


async def _require_person(principal: Annotated[Principal, Depends(get_principal)]) -> None:
    require_user(principal)


async def project_guard(
    request: Request,
    project_id: uuid.UUID,
    pool: DbPool,
    principal: Annotated[Principal, Depends(get_principal)],
) -> None:
    """THE tenancy guard: the path's project must belong to the caller's organisation."""
    request.scope[PROJECT_SCOPE_KEY] = await assert_project_access(pool, principal, project_id)


async def _unchecked_project(
    request: Request,
    project_id: uuid.UUID,
    principal: Annotated[Principal, Depends(get_principal)],
) -> None:
    """TEST ONLY (`_guard=False`): the project taken from the path without any check.

    Exists so the isolation test can prove it detects a missing guard; never mounted otherwise.
    """
    request.scope[PROJECT_SCOPE_KEY] = ProjectContext(
        principal=principal, org_id=principal.org_id, project_id=project_id, role=principal.role
    )


def _role_check(minimum: MemberRole) -> Callable[..., Awaitable[None]]:
    async def check_role(principal: Annotated[Principal, Depends(get_principal)]) -> None:
        require_role(principal, minimum)

    check_role.__name__ = f"require_{minimum.value}"
    return check_role


async def _auth_ceiling(pool: DbPool, settings: Annotated[Settings, Depends(get_settings)]) -> None:
    await ratelimit.check_auth_ceiling(pool, settings, current_client_ip())


def _chain(route: Route, *, guard: bool) -> list[DependsParam]:
    chain: list[DependsParam] = []
    if route.rate_limit in (RateLimitClass.AUTH, RateLimitClass.LOGIN):
        chain.append(Depends(_auth_ceiling))
    if route.scope is not Scope.PUBLIC:
        chain.append(Depends(get_principal))
    if route.scope in (Scope.USER, Scope.ORG):
        chain.append(Depends(_require_person))
    if route.scope is Scope.PROJECT:
        chain.append(Depends(project_guard if guard else _unchecked_project))
    if route.min_role is not None:
        chain.append(Depends(_role_check(route.min_role)))
    return chain


def _error_statuses(route: Route) -> list[int]:
    statuses = [400, 401, 404, 409, 422, 429]  # 401 too on PUBLIC: bad credentials/tokens
    if route.scope is not Scope.PUBLIC:
        statuses.append(403)
    if route.mutating:
        statuses.append(413)
    return sorted(statuses)


def mount_routes(
    app_or_router: FastAPI | APIRouter, routes: Sequence[Route], *, _guard: bool = True
) -> None:
    """Register every route with its full chain. `_guard=False` exists for one test only."""
    seen: set[tuple[str, str]] = set()
    operation_ids: set[str] = set()
    for route in routes:
        key = (route.method, route.path)
        if key in seen:
            raise ValueError(f"route declared twice: {route.method} {route.path}")
        seen.add(key)
        # Operation ids name the generated client's functions: they must be unique.
        operation_id = _operation_id(route)
        if operation_id in operation_ids:
            raise ValueError(f"{route.method} {route.path}: operation id {operation_id!r} is taken")
        operation_ids.add(operation_id)
        extra: dict[str, Any] = {}
        if route.response_model is not None:
            extra["response_model"] = route.response_model
        responses = documented_errors(_error_statuses(route))
        if route.response_class is not None:
            extra["response_class"] = route.response_class
            # Errors still answer the JSON envelope, not the stream's media type.
            responses = {
                status: {
                    "description": spec["description"],
                    "content": {
                        "application/json": {
                            "schema": {"$ref": "#/components/schemas/ErrorEnvelope"}
                        }
                    },
                }
                for status, spec in responses.items()
            }
            media_type = route.response_class.media_type
            schema = getattr(route.response_class, "openapi_schema", {"type": "string"})
            responses[route.status_code] = {
                "description": "Successful Response",
                "content": {media_type: {"schema": schema}},
            }
        app_or_router.add_api_route(
            route.full_path,
            route.handler,
            methods=[route.method],
            dependencies=_chain(route, guard=_guard),
            summary=route.summary,
            status_code=route.status_code,
            tags=list(route.tags) or None,
            responses=responses,
            openapi_extra={
                SCOPE_EXTENSION: route.scope.value,
                MIN_ROLE_EXTENSION: route.min_role.value if route.min_role else None,
            },
            operation_id=operation_id,
            **extra,
        )


def _operation_id(route: Route) -> str:
    name = getattr(route.handler, "__name__", "handler")
    return f"{name}_{route.method.lower()}"


# --- drift detection --------------------------------------------------------------------------

#: Endpoints under /api/v1 that FastAPI itself serves (the documentation).
_FRAMEWORK_PATHS = frozenset(
    {API_PREFIX + "/docs", API_PREFIX + "/openapi.json", API_PREFIX + "/docs/static"}
)


def unmounted_routes(app: FastAPI, routes: Sequence[Route]) -> list[str]:
    """Every endpoint under /api/v1 that did not come from `routes` through `mount_routes`,
    and every entry of `routes` that is missing. Empty when the app and the table agree."""
    declared = {(r.method, r.full_path): r for r in routes}
    found: set[tuple[str, str]] = set()
    problems: list[str] = []
    for registered in app.router.routes:
        path = getattr(registered, "path", "")
        if (
            not path.startswith(API_PREFIX)
            or path in _FRAMEWORK_PATHS
            or path.startswith(API_PREFIX + "/static")
        ):
            continue
        methods = sorted(getattr(registered, "methods", None) or {"*"})
        for method in methods:
            if method == "HEAD":
                continue
            key = (method, path)
            entry = declared.get(key)
            marked = isinstance(registered, APIRoute) and (registered.openapi_extra or {}).get(
                SCOPE_EXTENSION
            )
            if entry is None or not marked:
                problems.append(f"{method} {path}: registered outside mount_routes/ALL_ROUTES")
                continue
            found.add(key)
            if entry.scope is Scope.PROJECT and not _has_dependency(registered, project_guard):
                problems.append(f"{method} {path}: PROJECT-scoped but the guard is not attached")
    for key in declared.keys() - found:
        problems.append(f"{key[0]} {key[1]}: in ALL_ROUTES but not mounted")
    return sorted(problems)


def _has_dependency(route: Any, dependency: Callable[..., Any]) -> bool:
    return any(getattr(d, "dependency", None) is dependency for d in route.dependencies)
