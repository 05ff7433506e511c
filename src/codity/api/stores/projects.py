"""Projects of an organisation. SQL: `db/sql/api_projects.sql`.

Listing and creating name the caller's organisation. Reading, renaming and deleting one name
the project alone: those are PROJECT-scoped routes whose project the tenancy guard checked.
"""

from __future__ import annotations

from uuid import UUID

import asyncpg

from codity.api.schemas.auth import ProjectRef
from codity.api.schemas.tenancy import ProjectPublic
from codity.core import Conn
from codity.db.queries import Fragments, bind
from codity.domain.errors import ProjectNotFoundError, SlugTakenError


def _not_found() -> ProjectNotFoundError:
    return ProjectNotFoundError("project not found")


async def org_of(conn: Conn, project_id: UUID) -> UUID | None:
    """The organisation a project belongs to (None: no such project). The tenancy guard."""
    org_id: UUID | None = await bind("api_projects_org", project_id=project_id).fetchval(conn)
    return org_id


async def list_projects(
    conn: Conn, org_id: UUID, *, limit: int, after_slug: str | None
) -> list[ProjectPublic]:
    where = Fragments()
    if after_slug is not None:
        where.add("api_projects_after", after_slug=after_slug)
    rows = await where.bind("api_projects_list", org_id=org_id, limit=limit).fetch(conn)
    return [ProjectPublic(**dict(r)) for r in rows]


async def project_refs(conn: Conn, org_id: UUID) -> list[ProjectRef]:
    rows = await bind("api_projects_refs", org_id=org_id).fetch(conn)
    return [ProjectRef(**dict(r)) for r in rows]


async def create_project(conn: Conn, org_id: UUID, *, name: str, slug: str) -> ProjectPublic:
    try:
        row = await bind("api_projects_insert", org_id=org_id, name=name, slug=slug).fetchrow(conn)
    except asyncpg.UniqueViolationError:
        raise SlugTakenError("a project with this slug already exists") from None
    return ProjectPublic(**dict(row))


async def get_project(conn: Conn, project_id: UUID) -> ProjectPublic:
    row = await bind("api_projects_get", project_id=project_id).fetchrow(conn)
    if row is None:  # deleted between the guard's check and this read
        raise _not_found()
    return ProjectPublic(**dict(row))


async def update_project(
    conn: Conn,
    project_id: UUID,
    *,
    name: str | None,
    weight: int | None,
    http_allowlist: list[str] | None,
) -> ProjectPublic:
    """None keeps a column's value (none of them may be NULL; `[]` empties the allowlist)."""
    q = bind(
        "api_projects_update",
        project_id=project_id,
        name=name,
        weight=weight,
        http_allowlist=http_allowlist,
    )
    row = await q.fetchrow(conn)
    if row is None:
        raise _not_found()
    return ProjectPublic(**dict(row))


async def delete_project(conn: Conn, project_id: UUID) -> None:
    """The project and, by cascade, its queues, jobs, schedules and API keys."""
    await bind("api_projects_delete", project_id=project_id).execute(conn)
