"""/projects/{project_id}/dead-letters: list with reasons, replay (one, many, a whole queue),
discard (one, many). Replay and discard go through `codity.core`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import Query, Response

from codity import core
from codity.api.deps import DbPool, ProjectScope
from codity.api.masking import masked
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.ratelimit import check_enqueue_quota
from codity.api.resources._params import DeadLetterId, QueueFilter
from codity.api.resources._project_audit import atomic, audit
from codity.api.routing import RateLimitClass, Route, Scope
from codity.api.schemas.common import DEFAULT_PAGE_SIZE
from codity.api.schemas.dead_letters import (
    DeadLetterDiscard,
    DeadLetterReplay,
    DeadLettersPage,
    DiscardResult,
    ReplayResult,
)
from codity.api.stores import dead_letters as store
from codity.domain.states import MemberRole

TAG = "dead-letters"
BASE = "/projects/{project_id}/dead-letters"
ONE = BASE + "/{dead_letter_id}"


async def list_project_dead_letters(
    ctx: ProjectScope,
    pool: DbPool,
    queue: QueueFilter = None,
    include_replayed: Annotated[bool, Query(description="also list replayed ones")] = False,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> DeadLettersPage:
    after = decode_cursor(cursor, datetime, uuid.UUID)
    queue_id = (await core.resolve_queue(pool, ctx.project_id, queue)).id if queue else None
    items = await store.list_dead_letters(
        pool,
        ctx.project_id,
        queue_id=queue_id,
        include_replayed=include_replayed,
        limit=limit,
        after=(after[0], after[1]) if after else None,
    )
    total, reasons = await store.summarise(
        pool, ctx.project_id, queue_id=queue_id, include_replayed=include_replayed
    )
    return DeadLettersPage(
        items=[masked(ctx, d, "payload") for d in items],
        next_cursor=next_cursor(items, limit, lambda d: (d.failed_at, d.id)),
        total=total,
        reasons=reasons,
    )


async def replay_one(ctx: ProjectScope, pool: DbPool, dead_letter_id: DeadLetterId) -> ReplayResult:
    """A replay re-runs a job: it counts against the enqueue quotas like a new one."""
    await check_enqueue_quota(pool, ctx.project_id, ctx.org_id, 1)
    async with atomic(pool) as conn:
        job_ids = await core.replay_dead_letters(conn, ctx.project_id, [dead_letter_id])
        await audit(conn, ctx, "dead_letter.replay", "dead_letter", dead_letter_id, job_ids=job_ids)
    return ReplayResult(replayed=len(job_ids), job_ids=job_ids)


async def replay_many(ctx: ProjectScope, pool: DbPool, body: DeadLetterReplay) -> ReplayResult:
    """Either the listed ids (all must be this project's, else 404 and nothing replayed) or
    every pending dead letter of one queue. The whole count is reserved against the enqueue
    quotas first: a replay over them is refused whole."""
    queue_id = None
    if body.queue is not None:
        queue_id = (await core.resolve_queue(pool, ctx.project_id, body.queue)).id
        count = await store.pending_count(pool, ctx.project_id, queue_id)
    else:
        count = len(set(body.ids or []))
    if count:
        await check_enqueue_quota(pool, ctx.project_id, ctx.org_id, count)
    async with atomic(pool) as conn:
        if queue_id is not None:
            # At most what was reserved: dead letters arriving since the count wait for the
            # next replay rather than slip past the quota.
            job_ids = await core.replay_queue_dead_letters(
                conn, ctx.project_id, queue_id, limit=count
            )
        else:
            job_ids = await core.replay_dead_letters(conn, ctx.project_id, body.ids or [])
        await audit(conn, ctx, "dead_letter.replay_many", "project", ctx.project_id,
                    queue=body.queue, count=len(job_ids))  # fmt: skip
    return ReplayResult(replayed=len(job_ids), job_ids=job_ids)


async def discard_one(ctx: ProjectScope, pool: DbPool, dead_letter_id: DeadLetterId) -> Response:
    async with atomic(pool) as conn:
        await core.discard_dead_letters(conn, ctx.project_id, [dead_letter_id])
        await audit(conn, ctx, "dead_letter.discard", "dead_letter", dead_letter_id)
    return Response(status_code=204)


async def discard_many(ctx: ProjectScope, pool: DbPool, body: DeadLetterDiscard) -> DiscardResult:
    async with atomic(pool) as conn:
        discarded = await core.discard_dead_letters(conn, ctx.project_id, body.ids)
        await audit(
            conn, ctx, "dead_letter.discard_many", "project", ctx.project_id, count=discarded
        )
    return DiscardResult(discarded=discarded)


_P = Scope.PROJECT
ROUTES: list[Route] = [
    Route("GET", BASE, list_project_dead_letters, _P, MemberRole.VIEWER,
          "List dead letters (most recent first) with the most frequent reasons",
          response_model=DeadLettersPage, tags=(TAG,)),
    Route("POST", BASE + "/replay", replay_many, _P, MemberRole.MEMBER,
          "Replay many dead letters, or every pending one of a queue",
          response_model=ReplayResult, rate_limit=RateLimitClass.ENQUEUE, tags=(TAG,)),
    Route("POST", BASE + "/discard", discard_many, _P, MemberRole.MEMBER,
          "Discard many dead letters", response_model=DiscardResult, tags=(TAG,)),
    Route("POST", ONE + "/replay", replay_one, _P, MemberRole.MEMBER,
          "Replay one dead letter", response_model=ReplayResult,
          rate_limit=RateLimitClass.ENQUEUE, tags=(TAG,)),
    Route("DELETE", ONE, discard_one, _P, MemberRole.MEMBER,
          "Discard one dead letter", status_code=204, tags=(TAG,)),
]  # fmt: skip
