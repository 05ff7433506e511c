"""/projects/{project_id}/…/bulk-actions: one action on every job (retry, cancel, delete) or
dead letter (replay, discard) a filter matches, or on listed ids; read, list and stop them.

Creating one answers 202 at once: the API process runs it in the background, in chunks of at
most BULK_ACTION_CHUNK rows per transaction (`codity.api.bulk_runner`). The filter is frozen at
creation: its count is `matched`, and rows written later are never swept in. Listed ids must
all be the project's (404 otherwise, nothing created). A retry or replay re-runs jobs, so its
whole count is reserved against the enqueue quotas first (429, nothing created, when over).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import Path, Request

from codity import core
from codity.api.bulk_runner import write_audit
from codity.api.deps import DbPool, ProjectScope
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.principal import ProjectContext
from codity.api.ratelimit import check_enqueue_quota
from codity.api.request_context import current_request_id
from codity.api.resources._project_audit import atomic
from codity.api.resources.jobs import resolve_job_filter
from codity.api.routing import RateLimitClass, Route, Scope
from codity.api.schemas.bulk_actions import (
    BulkActionPublic,
    BulkActionsPage,
    DeadLettersBulkActionCreate,
    JobsBulkActionCreate,
)
from codity.api.schemas.common import DEFAULT_PAGE_SIZE, RequestModel
from codity.api.stores import bulk_actions as store
from codity.domain.errors import DeadLetterNotFoundError, JobNotFoundError, NotFoundError
from codity.domain.states import MemberRole

TAG = "bulk-actions"
BASE = "/projects/{project_id}/bulk-actions"
ONE = BASE + "/{bulk_action_id}"

BulkActionId = Annotated[uuid.UUID, Path(description="bulk action id")]


def _actor(ctx: ProjectContext) -> dict[str, Any]:
    return {
        "project_id": ctx.project_id,
        "created_by": ctx.principal.user_id,
        "created_by_api_key": ctx.principal.api_key_id,
        "request_id": current_request_id(),
    }


def _require_all_found(found: int, listed: int, error: type[NotFoundError], what: str) -> None:
    """Listed ids must all be the project's: 404 with how many are not, nothing created."""
    if found != listed:
        raise error(
            f"{listed - found} of the {listed} ids are not {what} of this project",
            details={"missing": listed - found},
        )


async def _start(
    ctx: ProjectContext,
    pool: DbPool,
    request: Request,
    *,
    target: str,
    action: str,
    body_filter: RequestModel | None,
    ids: list[Any] | None,
    queue_id: uuid.UUID | None,
    high_water_id: int | None,
    matched: int,
    re_runs: bool,
) -> BulkActionPublic:
    """Reserve the enqueue quota for an action that re-runs what it matched (429, nothing
    created, when over), record the action, and wake this process's runner."""
    if re_runs and matched:
        await check_enqueue_quota(pool, ctx.project_id, ctx.org_id, matched)
    row = await store.insert(
        pool,
        target=target,
        action=action,
        filter=body_filter.model_dump(mode="json", exclude_none=True) if body_filter else None,
        ids=ids,
        queue_id=queue_id,
        high_water_id=high_water_id,
        matched=matched,
        **_actor(ctx),
    )
    request.app.state.bulk_wake.set()
    return store.public(row)


async def create_jobs_bulk_action(
    ctx: ProjectScope, pool: DbPool, request: Request, body: JobsBulkActionCreate
) -> BulkActionPublic:
    """202: the action runs in the background; poll `GET …/bulk-actions/{id}` for progress."""
    queue_id = None
    job_filter = None
    ids = None
    if body.filter is not None:
        job_filter = await resolve_job_filter(pool, ctx, body.filter)
        queue_id = job_filter.queue_id
    else:
        ids = sorted(set(body.ids or []))
        found = await store.count_jobs(
            pool, ctx.project_id, store.job_fragments(filter=None, ids=ids, high_water_id=None)
        )
        _require_all_found(found, len(ids), JobNotFoundError, "jobs")
    high_water = await store.high_water_id(pool)
    matched = await store.count_jobs(
        pool,
        ctx.project_id,
        store.job_fragments(filter=job_filter, ids=ids, high_water_id=high_water),
    )
    return await _start(
        ctx,
        pool,
        request,
        target="jobs",
        action=body.action,
        body_filter=body.filter,
        ids=ids,
        queue_id=queue_id,
        high_water_id=high_water,
        matched=matched,
        re_runs=body.action == "retry",
    )


async def create_dead_letters_bulk_action(
    ctx: ProjectScope, pool: DbPool, request: Request, body: DeadLettersBulkActionCreate
) -> BulkActionPublic:
    """202: replay re-queues (only dead letters not replayed yet), discard deletes them."""
    queue_id = None
    ids = None
    if body.filter is not None and body.filter.queue is not None:
        queue_id = (await core.resolve_queue(pool, ctx.project_id, body.filter.queue)).id
    if body.ids is not None:
        ids = sorted(set(body.ids))
        found = await store.count_dead_letters(
            pool,
            ctx.project_id,
            store.dead_letter_fragments(
                filter=None, queue_id=None, ids=ids, frozen_at=None, pending_only=False
            ),
        )
        _require_all_found(found, len(ids), DeadLetterNotFoundError, "dead letters")
    matched = await store.count_dead_letters(
        pool,
        ctx.project_id,
        store.dead_letter_fragments(
            filter=body.filter,
            queue_id=queue_id,
            ids=ids,
            frozen_at=None,
            pending_only=body.action == "replay",
        ),
    )
    return await _start(
        ctx,
        pool,
        request,
        target="dead_letters",
        action=body.action,
        body_filter=body.filter,
        ids=[str(i) for i in ids] if ids is not None else None,
        queue_id=queue_id,
        high_water_id=None,
        matched=matched,
        re_runs=body.action == "replay",
    )


async def list_bulk_actions(
    ctx: ProjectScope, pool: DbPool, limit: Limit = DEFAULT_PAGE_SIZE, cursor: Cursor = None
) -> BulkActionsPage:
    after = decode_cursor(cursor, datetime, uuid.UUID)
    items = await store.page(
        pool, ctx.project_id, limit=limit, after=(after[0], after[1]) if after else None
    )
    return BulkActionsPage(
        items=items, next_cursor=next_cursor(items, limit, lambda b: (b.created_at, b.id))
    )


async def read_bulk_action(
    ctx: ProjectScope, pool: DbPool, bulk_action_id: BulkActionId
) -> BulkActionPublic:
    return await store.get(pool, ctx.project_id, bulk_action_id)


async def stop_bulk_action(
    ctx: ProjectScope, pool: DbPool, bulk_action_id: BulkActionId
) -> BulkActionPublic:
    """An open action ends as `stopped` after the chunk in flight; the counts are then final.
    A finished one is returned as it is."""
    async with atomic(pool) as conn:
        stopped = await store.stop(conn, ctx.project_id, bulk_action_id)
        if stopped is not None:
            await write_audit(conn, stopped)
    return await store.get(pool, ctx.project_id, bulk_action_id)


_P = Scope.PROJECT
ROUTES: list[Route] = [
    Route("POST", "/projects/{project_id}/jobs/bulk-actions", create_jobs_bulk_action, _P,
          MemberRole.MEMBER,
          "Retry, cancel or delete every job a filter matches (or the listed ids), in the "
          "background (202)",
          response_model=BulkActionPublic, status_code=202, rate_limit=RateLimitClass.ENQUEUE,
          tags=(TAG,)),
    Route("POST", "/projects/{project_id}/dead-letters/bulk-actions",
          create_dead_letters_bulk_action, _P, MemberRole.MEMBER,
          "Replay or discard every dead letter a filter matches (or the listed ids), in the "
          "background (202)",
          response_model=BulkActionPublic, status_code=202, rate_limit=RateLimitClass.ENQUEUE,
          tags=(TAG,)),
    Route("GET", BASE, list_bulk_actions, _P, MemberRole.VIEWER,
          "List bulk actions (newest first)", response_model=BulkActionsPage, tags=(TAG,)),
    Route("GET", ONE, read_bulk_action, _P, MemberRole.VIEWER,
          "A bulk action with its progress", response_model=BulkActionPublic, tags=(TAG,)),
    Route("POST", ONE + "/stop", stop_bulk_action, _P, MemberRole.MEMBER,
          "Stop a bulk action after the chunk in flight", response_model=BulkActionPublic,
          tags=(TAG,)),
]  # fmt: skip
