"""Workers serving the caller's queues: org-wide (/workers) and per project."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import Query

from codity.api.deps import CurrentPrincipal, DbPool, ProjectScope
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.routing import Route, Scope
from codity.api.schemas.common import DEFAULT_PAGE_SIZE
from codity.api.schemas.workers import WorkersPage
from codity.api.stores.workers import list_workers
from codity.domain.states import MemberRole, WorkerStatus

TAG = "workers"
StatusFilter = Annotated[WorkerStatus | None, Query(description="only workers in this status")]


async def _page(
    pool: DbPool,
    org_id: uuid.UUID,
    project_id: uuid.UUID | None,
    status: WorkerStatus | None,
    limit: int,
    cursor: str | None,
) -> WorkersPage:
    after = decode_cursor(cursor, datetime, uuid.UUID)
    items = await list_workers(
        pool,
        org_id,
        project_id=project_id,
        status=status,
        limit=limit,
        after=(after[0], after[1]) if after else None,
    )
    return WorkersPage(
        items=items, next_cursor=next_cursor(items, limit, lambda w: (w.started_at, w.id))
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
