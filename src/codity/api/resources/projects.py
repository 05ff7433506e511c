"""/projects: the organisation's projects. Listing and creating are ORG-scoped; reading,
renaming and deleting one are PROJECT-scoped: the guard has checked the project against the
caller's organisation, so these statements name the project by its id alone (as every
project-scoped handler does), which is what lets the isolation test prove the guard matters."""

from __future__ import annotations

import re
import secrets

from fastapi import Response

from codity.api.audit import record_audit
from codity.api.deps import AppSettings, CurrentPrincipal, DbPool, ProjectScope
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.routing import Route, Scope
from codity.api.schemas.common import DEFAULT_PAGE_SIZE
from codity.api.schemas.tenancy import ProjectCreate, ProjectPublic, ProjectsPage, ProjectUpdate
from codity.api.security import require_user
from codity.api.stores import orgs
from codity.api.stores import projects as store
from codity.domain.states import MemberRole


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:50].strip("-")
    return slug or f"project-{secrets.token_hex(3)}"


async def list_projects(
    principal: CurrentPrincipal,
    pool: DbPool,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> ProjectsPage:
    after = decode_cursor(cursor, str)
    items = await store.list_projects(
        pool, principal.org_id, limit=limit, after_slug=after[0] if after else None
    )
    return ProjectsPage(items=items, next_cursor=next_cursor(items, limit, lambda p: (p.slug,)))


async def create_project(
    body: ProjectCreate, principal: CurrentPrincipal, pool: DbPool, settings: AppSettings
) -> ProjectPublic:
    """At most MAX_PROJECTS_PER_ORG: each project has its own enqueue window, so unlimited
    projects would multiply the quota (the organisation's window caps that too)."""
    async with pool.acquire() as conn, conn.transaction():
        await orgs.reserve_slot(conn, principal.org_id, "projects", settings.max_projects_per_org)
        project = await store.create_project(
            conn, principal.org_id, name=body.name, slug=body.slug or _slug(body.name)
        )
        await record_audit(
            conn,
            principal,
            "project.create",
            project_id=project.id,
            target_type="project",
            target_id=project.id,
        )
    return project


async def read_project(ctx: ProjectScope, pool: DbPool) -> ProjectPublic:
    return await store.get_project(pool, ctx.project_id)


async def update_project(body: ProjectUpdate, ctx: ProjectScope, pool: DbPool) -> ProjectPublic:
    """Rename a project, change its fair-share weight, or set the hosts its http_request jobs
    may reach although they are internal (only those the deployment's HTTP_HANDLER_ALLOWLIST
    names too). The weight decides the project's share of workers other projects use too, so
    only an organisation admin (a person, not a project's API key) may change it."""
    if body.weight is not None:
        require_user(ctx.principal)
    changes = body.model_dump(exclude_unset=True)
    async with pool.acquire() as conn, conn.transaction():
        project = await store.update_project(
            conn,
            ctx.project_id,
            name=body.name,
            weight=body.weight,
            http_allowlist=body.http_allowlist,
        )
        await record_audit(
            conn,
            ctx.principal,
            "project.update",
            project_id=ctx.project_id,
            target_type="project",
            target_id=ctx.project_id,
            details={"fields": sorted(changes), **{
                k: changes[k] for k in ("weight", "http_allowlist") if k in changes
            }},
        )  # fmt: skip
    return project


async def delete_project(ctx: ProjectScope, pool: DbPool) -> Response:
    """Deletes the project and, by cascade, its queues, jobs, schedules and API keys."""
    async with pool.acquire() as conn, conn.transaction():
        await store.delete_project(conn, ctx.project_id)
        await record_audit(
            conn, ctx.principal, "project.delete", target_type="project", target_id=ctx.project_id
        )
    return Response(status_code=204)


_TAGS = ("projects",)
ONE = "/projects/{project_id}"
ROUTES: list[Route] = [
    Route("GET", "/projects", list_projects, Scope.ORG, MemberRole.VIEWER,
          "Projects of the organisation", response_model=ProjectsPage, tags=_TAGS),
    Route("POST", "/projects", create_project, Scope.ORG, MemberRole.ADMIN,
          "Create a project", response_model=ProjectPublic, status_code=201, tags=_TAGS),
    Route("GET", ONE, read_project, Scope.PROJECT, MemberRole.VIEWER,
          "One project", response_model=ProjectPublic, tags=_TAGS),
    Route("PATCH", ONE, update_project, Scope.PROJECT, MemberRole.ADMIN,
          "Rename a project, change its fair-share weight (organisation admins) or set its "
          "http_request allowlist", response_model=ProjectPublic, tags=_TAGS),
    Route("DELETE", ONE, delete_project, Scope.PROJECT, MemberRole.ADMIN,
          "Delete a project and everything in it", status_code=204, tags=_TAGS),
]  # fmt: skip
