"""/projects: the organisation's projects. Listing and creating are ORG-scoped; reading,
renaming and deleting one are PROJECT-scoped: the guard has checked the project against the
caller's organisation, so these statements name the project by its id alone (as every
project-scoped handler does), which is what lets the isolation test prove the guard matters."""

from __future__ import annotations

import re
import secrets

import asyncpg
from fastapi import Response

from codity.api.audit import record_audit
from codity.api.deps import CurrentPrincipal, DbPool, ProjectScope
from codity.api.resources._tenancy_common import (
    DEFAULT_LIMIT,
    PageCursor,
    PageLimit,
    decode_cursor,
    encode_cursor,
)
from codity.api.routing import Route, Scope
from codity.api.schemas.tenancy import ProjectCreate, ProjectPublic, ProjectsPage, ProjectUpdate
from codity.api.security import ProjectNotFoundError
from codity.domain.errors import ConflictError
from codity.domain.states import MemberRole

_COLUMNS = "id, name, slug, created_at"


class SlugTakenError(ConflictError):
    code = "slug_taken"


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:50].strip("-")
    return slug or f"project-{secrets.token_hex(3)}"


async def list_projects(
    principal: CurrentPrincipal,
    pool: DbPool,
    limit: PageLimit = DEFAULT_LIMIT,
    cursor: PageCursor = None,
) -> ProjectsPage:
    rows = await pool.fetch(
        f"""SELECT {_COLUMNS} FROM projects
             WHERE org_id = $1 AND ($2::text IS NULL OR slug > $2)
             ORDER BY slug LIMIT $3""",
        principal.org_id,
        decode_cursor(cursor),
        limit,
    )
    items = [ProjectPublic(**dict(r)) for r in rows]
    return ProjectsPage(
        items=items, next_cursor=encode_cursor(items[-1].slug) if len(items) == limit else None
    )


async def create_project(
    body: ProjectCreate, principal: CurrentPrincipal, pool: DbPool
) -> ProjectPublic:
    async with pool.acquire() as conn, conn.transaction():
        try:
            row = await conn.fetchrow(
                f"INSERT INTO projects (org_id, name, slug) VALUES ($1, $2, $3) RETURNING {_COLUMNS}",
                principal.org_id,
                body.name,
                body.slug or _slug(body.name),
            )
        except asyncpg.UniqueViolationError:
            raise SlugTakenError("a project with this slug already exists") from None
        await record_audit(
            conn,
            principal,
            "project.create",
            project_id=row["id"],
            target_type="project",
            target_id=row["id"],
        )
    return ProjectPublic(**dict(row))


async def read_project(ctx: ProjectScope, pool: DbPool) -> ProjectPublic:
    row = await pool.fetchrow(f"SELECT {_COLUMNS} FROM projects WHERE id = $1", ctx.project_id)
    if row is None:  # deleted between the guard's check and this read
        raise ProjectNotFoundError("project not found")
    return ProjectPublic(**dict(row))


async def update_project(body: ProjectUpdate, ctx: ProjectScope, pool: DbPool) -> ProjectPublic:
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            f"UPDATE projects SET name = $2 WHERE id = $1 RETURNING {_COLUMNS}",
            ctx.project_id,
            body.name,
        )
        if row is None:
            raise ProjectNotFoundError("project not found")
        await record_audit(
            conn,
            ctx.principal,
            "project.update",
            project_id=ctx.project_id,
            target_type="project",
            target_id=ctx.project_id,
        )
    return ProjectPublic(**dict(row))


async def delete_project(ctx: ProjectScope, pool: DbPool) -> Response:
    """Deletes the project and, by cascade, its queues, jobs, schedules and API keys."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("DELETE FROM projects WHERE id = $1", ctx.project_id)
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
          "Rename a project", response_model=ProjectPublic, tags=_TAGS),
    Route("DELETE", ONE, delete_project, Scope.PROJECT, MemberRole.ADMIN,
          "Delete a project and everything in it", status_code=204, tags=_TAGS),
]  # fmt: skip
