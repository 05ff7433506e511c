"""/projects/{project_id}/queues: CRUD, pause/resume (through codity.core) and statistics."""

from __future__ import annotations

from fastapi import Response

from codity import core
from codity.api.deps import AppSettings, DbPool, ProjectScope
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.resources._params import QueueId
from codity.api.resources._project_audit import atomic, audit
from codity.api.routing import Route, Scope
from codity.api.schemas.common import DEFAULT_PAGE_SIZE
from codity.api.schemas.queues import (
    QueueCreate,
    QueuePublic,
    QueuesPage,
    QueueStats,
    QueueUpdate,
)
from codity.api.stores import orgs
from codity.api.stores import queues as store
from codity.domain.states import MemberRole

TAG = "queues"
BASE = "/projects/{project_id}/queues"
ONE = BASE + "/{queue_id}"


async def list_project_queues(
    ctx: ProjectScope, pool: DbPool, limit: Limit = DEFAULT_PAGE_SIZE, cursor: Cursor = None
) -> QueuesPage:
    after = decode_cursor(cursor, str)
    items = await store.list_queues(
        pool, ctx.project_id, limit=limit, after_name=after[0] if after else None
    )
    return QueuesPage(items=items, next_cursor=next_cursor(items, limit, lambda q: (q.name,)))


async def create_queue(
    ctx: ProjectScope, pool: DbPool, body: QueueCreate, settings: AppSettings
) -> QueuePublic:
    async with atomic(pool) as conn:
        await orgs.reserve_slot(conn, ctx.org_id, "queues", settings.max_queues_per_org)
        queue_id = await store.create_queue(conn, ctx.project_id, body)
        await audit(conn, ctx, "queue.create", "queue", queue_id, name=body.name)
    return await store.get_queue(pool, ctx.project_id, queue_id)


async def read_queue(ctx: ProjectScope, pool: DbPool, queue_id: QueueId) -> QueuePublic:
    return await store.get_queue(pool, ctx.project_id, queue_id)


async def update_queue(
    ctx: ProjectScope, pool: DbPool, queue_id: QueueId, body: QueueUpdate
) -> QueuePublic:
    changes = body.model_dump(exclude_unset=True)
    async with atomic(pool) as conn:
        await store.update_queue(conn, ctx.project_id, queue_id, changes)
        await audit(conn, ctx, "queue.update", "queue", queue_id, fields=sorted(changes))
    return await store.get_queue(pool, ctx.project_id, queue_id)


async def delete_queue(ctx: ProjectScope, pool: DbPool, queue_id: QueueId) -> Response:
    async with atomic(pool) as conn:
        await store.delete_queue(conn, ctx.project_id, queue_id)
        await audit(conn, ctx, "queue.delete", "queue", queue_id)
    return Response(status_code=204)


async def pause_queue(ctx: ProjectScope, pool: DbPool, queue_id: QueueId) -> QueuePublic:
    async with atomic(pool) as conn:
        await core.pause_queue(conn, ctx.project_id, queue_id)  # 404 unless it is this project's
        await audit(conn, ctx, "queue.pause", "queue", queue_id)
    return await store.get_queue(pool, ctx.project_id, queue_id)


async def resume_queue(ctx: ProjectScope, pool: DbPool, queue_id: QueueId) -> QueuePublic:
    async with atomic(pool) as conn:
        await core.resume_queue(conn, ctx.project_id, queue_id)
        await core.cancel_drain(conn, ctx.project_id, queue_id)  # resuming ends a drain too
        await audit(conn, ctx, "queue.resume", "queue", queue_id)
    return await store.get_queue(pool, ctx.project_id, queue_id)


async def drain_queue(ctx: ProjectScope, pool: DbPool, queue_id: QueueId) -> QueuePublic:
    """The queue takes no new jobs (enqueue answers 409 queue_draining), workers finish every
    job it has, and the scheduler pauses it once none is unfinished; resume ends a drain."""
    async with atomic(pool) as conn:
        await core.start_drain(conn, ctx.project_id, queue_id)  # 404 unless this project's
        await audit(conn, ctx, "queue.drain", "queue", queue_id)
    return await store.get_queue(pool, ctx.project_id, queue_id)


async def read_queue_stats(ctx: ProjectScope, pool: DbPool, queue_id: QueueId) -> QueueStats:
    return await store.queue_stats(pool, ctx.project_id, queue_id)


_P = Scope.PROJECT
ROUTES: list[Route] = [
    Route("GET", BASE, list_project_queues, _P, MemberRole.VIEWER,
          "List queues with their depth", response_model=QueuesPage, tags=(TAG,)),
    Route("POST", BASE, create_queue, _P, MemberRole.ADMIN,
          "Create a queue", response_model=QueuePublic, status_code=201, tags=(TAG,)),
    Route("GET", ONE, read_queue, _P, MemberRole.VIEWER,
          "Read a queue", response_model=QueuePublic, tags=(TAG,)),
    Route("PATCH", ONE, update_queue, _P, MemberRole.ADMIN,
          "Change a queue's settings", response_model=QueuePublic, tags=(TAG,)),
    Route("DELETE", ONE, delete_queue, _P, MemberRole.ADMIN,
          "Delete a queue and its jobs (refused while jobs of it are executing)",
          status_code=204, tags=(TAG,)),
    Route("POST", ONE + "/pause", pause_queue, _P, MemberRole.ADMIN,
          "Pause a queue: claims stop, running jobs finish", response_model=QueuePublic,
          tags=(TAG,)),
    Route("POST", ONE + "/resume", resume_queue, _P, MemberRole.ADMIN,
          "Resume a paused queue (ends a drain too)", response_model=QueuePublic, tags=(TAG,)),
    Route("POST", ONE + "/drain", drain_queue, _P, MemberRole.ADMIN,
          "Drain a queue: no new jobs, workers finish the ones it has, then it pauses",
          response_model=QueuePublic, tags=(TAG,)),
    Route("GET", ONE + "/stats", read_queue_stats, _P, MemberRole.VIEWER,
          "Queue statistics: depth, claimable, throughput, wait and run percentiles",
          response_model=QueueStats, tags=(TAG,)),
]  # fmt: skip
