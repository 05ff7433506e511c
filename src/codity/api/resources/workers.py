"""Workers serving the caller's queues: org-wide (/workers) and per project."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import Query

from codity.api.deps import CurrentPrincipal, DbPool, ProjectScope
from codity.api.read_models.pagination import decode_cursor, encode_cursor
from codity.api.read_models.workers import list_workers
from codity.api.resource_errors import InvalidCursorError
from codity.api.resources._params import Cursor, Limit
from codity.api.routing import Route, Scope
from codity.api.schemas.common import DEFAULT_PAGE_SIZE
from codity.api.schemas.workers import WorkersPage
from codity.domain.states import MemberRole, WorkerStatus

TAG = "workers"
StatusFilter = Annotated[WorkerStatus | None, Query(description="only workers in this status")]


def _after(cursor: str | None) -> tuple[datetime, uuid.UUID] | None:
    if not cursor:
        return None
    started_at, wid = decode_cursor(cursor, 2)
    try:
        return datetime.fromisoformat(str(started_at)), uuid.UUID(str(wid))
    except ValueError:
        raise InvalidCursorError("cursor is not valid: pass next_cursor back unchanged") from None


async def _page(
    pool: DbPool,
    org_id: uuid.UUID,
    project_id: uuid.UUID | None,
    status: WorkerStatus | None,
    limit: int,
    cursor: str | None,
) -> WorkersPage:
    items = await list_workers(
        pool, org_id, project_id=project_id, status=status, limit=limit, after=_after(cursor)
    )
    last = items[-1] if len(items) == limit else None
    return WorkersPage(
        items=items,
        next_cursor=encode_cursor(last.started_at.isoformat(), str(last.id)) if last else None,
    )


async def list_org_workers(
    principal: CurrentPrincipal,
    pool: DbPool,
    status: StatusFilter = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> WorkersPage:
    """The org comes from the token: a worker shows only if it serves one of the org's queues."""
    return await _page(pool, principal.org_id, None, status, limit, cursor)


async def list_project_workers(
    ctx: ProjectScope,
    pool: DbPool,
    status: StatusFilter = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> WorkersPage:
    return await _page(pool, ctx.org_id, ctx.project_id, status, limit, cursor)


ROUTES: list[Route] = [
    Route("GET", "/workers", list_org_workers, Scope.ORG, MemberRole.VIEWER,
          "Workers serving the organisation's queues", response_model=WorkersPage, tags=(TAG,)),
    Route("GET", "/projects/{project_id}/workers", list_project_workers, Scope.PROJECT,
          MemberRole.VIEWER, "Workers serving the project's queues", response_model=WorkersPage,
          tags=(TAG,)),
]  # fmt: skip
