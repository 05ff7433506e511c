"""/projects/{project_id}/jobs: enqueue (one, bulk), list, detail, logs, retry, cancel.

Every state change goes through `codity.core`. Enqueue and retry reserve the project's and the
organisation's per-minute quotas BEFORE writing anything (`check_enqueue_quota`), so a request
past a limit stores nothing.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends, Header, Query, Response
from pydantic import AwareDatetime

from codity import core
from codity.api.deps import AppSettings, DbPool, ProjectScope
from codity.api.masking import hides_secrets, masked
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.ratelimit import check_enqueue_quota
from codity.api.resources._params import JobId, QueueFilter
from codity.api.resources._project_audit import atomic, audit
from codity.api.routing import RateLimitClass, Route, Scope
from codity.api.schemas.bulk_actions import JobsCount, JobsFilter
from codity.api.schemas.common import DEFAULT_PAGE_SIZE, NO_NUL_PATTERN
from codity.api.schemas.jobs import (
    EnqueuedJobPublic,
    JobCreate,
    JobDetail,
    JobExplanation,
    JobFields,
    JobLogsPage,
    JobPublic,
    JobsBulkCreate,
    JobsBulkResult,
    JobsPage,
)
from codity.api.stores import bulk_actions as bulk_store
from codity.api.stores import jobs as store
from codity.api.stores.jobs import JobFilter
from codity.domain.errors import ForbiddenError, ValidationError
from codity.domain.masking import names_a_secret
from codity.domain.states import JobStatus, MemberRole

TAG = "jobs"
BASE = "/projects/{project_id}/jobs"
ONE = BASE + "/{job_id}"

IdempotencyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=NO_NUL_PATTERN,
        description="alternative to the body's idempotency_key",
    ),
]


def _new_job(fields: JobFields, *, batch_id: uuid.UUID | None, key: str | None) -> core.NewJob:
    return core.NewJob(
        handler=fields.handler,
        payload=fields.payload,
        priority=fields.priority,
        run_at=fields.run_at,
        delay_s=fields.delay_s,
        idempotency_key=key,
        batch_id=batch_id,
        depends_on=tuple(fields.depends_on),
        timeout_ms=fields.timeout_ms,
        max_attempts=fields.max_attempts,
        retry_policy_id=fields.retry_policy_id,
        concurrency_key=fields.concurrency_key,
        unique_for_s=fields.unique_for_s,
        unique_key=fields.unique_key,
        unique_states=fields.unique_states,
    )


def _one_key(body_key: str | None, header_key: str | None) -> str | None:
    if body_key and header_key and body_key != header_key:
        raise ValidationError(
            "the Idempotency-Key header and the body's idempotency_key differ; give one"
        )
    return body_key or header_key


async def enqueue_job(
    ctx: ProjectScope,
    pool: DbPool,
    body: JobCreate,
    response: Response,
    idempotency_key: IdempotencyHeader = None,
) -> JobPublic:
    """201 with the new job; 200 with the existing one when the idempotency key or the unique
    key (unique_for_s) matched."""
    key = _one_key(body.idempotency_key, idempotency_key)
    queue = await core.resolve_queue(pool, ctx.project_id, body.queue)
    await core.refuse_if_draining(pool, ctx.project_id, [queue.id])
    await check_enqueue_quota(pool, ctx.project_id, ctx.org_id, 1)
    result = await core.enqueue(
        pool, queue.id, _new_job(body, batch_id=body.batch_id, key=key), project_id=ctx.project_id
    )
    if not result.created:
        response.status_code = 200
    return await store.get_job(pool, ctx.project_id, result.id)


async def enqueue_bulk(
    ctx: ProjectScope,
    pool: DbPool,
    body: JobsBulkCreate,
    idempotency_key: IdempotencyHeader = None,
) -> JobsBulkResult:
    """All or nothing: every job is written in one transaction, under one batch id.

    The `Idempotency-Key` header makes the whole batch repeatable: job i gets `<key>:<i>`.
    """
    batch_id = body.batch_id or uuid.uuid4()
    names = {job.queue or body.queue for job in body.jobs}
    queue_ids = {
        name: (await core.resolve_queue(pool, ctx.project_id, name)).id
        for name in sorted(n for n in names if n is not None)
    }
    await core.refuse_if_draining(pool, ctx.project_id, list(queue_ids.values()))
    await check_enqueue_quota(pool, ctx.project_id, ctx.org_id, len(body.jobs))
    by_queue: dict[uuid.UUID, list[int]] = {}
    for i, job in enumerate(body.jobs):
        by_queue.setdefault(queue_ids[job.queue or body.queue or ""], []).append(i)
    out: list[EnqueuedJobPublic | None] = [None] * len(body.jobs)
    async with pool.acquire() as conn, conn.transaction():
        for queue_id, positions in by_queue.items():
            new_jobs = [
                _new_job(
                    body.jobs[i],
                    batch_id=batch_id,
                    key=body.jobs[i].idempotency_key
                    or (f"{idempotency_key}:{i}" if idempotency_key else None),
                )
                for i in positions
            ]
            results = await core.enqueue_many(conn, queue_id, new_jobs, project_id=ctx.project_id)
            for i, r in zip(positions, results, strict=True):
                out[i] = EnqueuedJobPublic(
                    id=r.id, queue_id=queue_id, status=r.status, created=r.created
                )
    return JobsBulkResult(batch_id=batch_id, jobs=[j for j in out if j is not None])


async def jobs_filter_query(
    queue: QueueFilter = None,
    status: Annotated[list[JobStatus] | None, Query(description="repeat for several")] = None,
    handler: Annotated[
        str | None, Query(min_length=1, max_length=200, pattern=NO_NUL_PATTERN)
    ] = None,
    created_after: AwareDatetime | None = None,
    created_before: AwareDatetime | None = None,
    batch_id: uuid.UUID | None = None,
    q: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=255,
            pattern=NO_NUL_PATTERN,
            description="a job id, or part of an idempotency key",
        ),
    ] = None,
    payload: Annotated[
        str | None,
        Query(
            min_length=3,
            max_length=500,
            pattern=NO_NUL_PATTERN,
            description="payload search `path = value`, e.g. `customer_id = 42` (JSON value or a word)",
        ),
    ] = None,
    error: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            pattern=NO_NUL_PATTERN,
            description="words that all appear in the job's last error",
        ),
    ] = None,
) -> JobsFilter:
    """The jobs list's filters (query parameters), shared by the list, the count and the body
    of a bulk action (`JobsFilter`)."""
    return JobsFilter.model_construct(
        queue=queue,
        status=status,
        handler=handler,
        created_after=created_after,
        created_before=created_before,
        batch_id=batch_id,
        q=q,
        payload=payload,
        error=error,
    )


JobsQuery = Annotated[JobsFilter, Depends(jobs_filter_query)]


async def resolve_job_filter(pool: DbPool, ctx: ProjectScope, filters: JobsFilter) -> JobFilter:
    """The filters as the store takes them (the queue named within the project), shared by the
    list, the count and a bulk action's filter."""
    queue = filters.queue
    queue_id = (await core.resolve_queue(pool, ctx.project_id, queue)).id if queue else None
    job_filter = bulk_store.job_filter(filters, queue_id)
    match = job_filter.payload_match
    if match is not None and hides_secrets(ctx) and names_a_secret(match):
        # An exact-match search (or count) would tell a viewer whether a guess of a masked
        # value is right.
        raise ForbiddenError(
            "a viewer cannot search payloads by a secret-looking key (its values are masked)"
        )
    return job_filter


async def list_project_jobs(
    ctx: ProjectScope,
    pool: DbPool,
    filters: JobsQuery,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> JobsPage:
    after = decode_cursor(cursor, int)
    job_filter = await resolve_job_filter(pool, ctx, filters)
    items = await store.list_jobs(
        pool, ctx.project_id, job_filter, limit=limit, before_id=after[0] if after else None
    )
    return JobsPage(items=items, next_cursor=next_cursor(items, limit, lambda j: (j.id,)))


async def count_project_jobs(ctx: ProjectScope, pool: DbPool, filters: JobsQuery) -> JobsCount:
    """How many jobs the filters of `GET /jobs` match (the dashboard's "all N matching")."""
    job_filter = await resolve_job_filter(pool, ctx, filters)
    where = bulk_store.job_fragments(filter=job_filter, ids=None, high_water_id=None)
    return JobsCount(count=await bulk_store.count_jobs(pool, ctx.project_id, where))


async def read_job(ctx: ProjectScope, pool: DbPool, job_id: JobId) -> JobDetail:
    """Values under secret-looking keys of the payload, result and log fields are masked for
    viewers."""
    job = await store.get_job_detail(pool, ctx.project_id, job_id)
    job = masked(ctx, job, "payload", "result")
    return job.model_copy(update={"logs": [masked(ctx, line, "fields") for line in job.logs]})


async def explain_job(
    ctx: ProjectScope, pool: DbPool, settings: AppSettings, job_id: JobId
) -> JobExplanation:
    """Why the job is not running: each blocker with the data behind it, or `claimable`."""
    return await store.explain_job(
        pool, ctx.project_id, job_id, dead_after_ms=settings.dead_worker_after_ms
    )


async def read_job_logs(
    ctx: ProjectScope,
    pool: DbPool,
    job_id: JobId,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> JobLogsPage:
    after = decode_cursor(cursor, int)
    items = await store.list_job_logs(
        pool, ctx.project_id, job_id, limit=limit, after_id=after[0] if after else None
    )
    return JobLogsPage(
        items=[masked(ctx, line, "fields") for line in items],
        next_cursor=next_cursor(items, limit, lambda line: (line.id,)),
    )


async def retry_job(ctx: ProjectScope, pool: DbPool, job_id: JobId) -> JobPublic:
    """A re-run counts against the enqueue quotas like a new job."""
    await check_enqueue_quota(pool, ctx.project_id, ctx.org_id, 1)
    async with atomic(pool) as conn:
        await core.retry_job(conn, ctx.project_id, job_id)  # 404 unless it is this project's
        await audit(conn, ctx, "job.retry", "job", job_id)
    return await store.get_job(pool, ctx.project_id, job_id)


async def cancel_job(ctx: ProjectScope, pool: DbPool, job_id: JobId) -> JobPublic:
    """Cancelled now when not started; a running job gets cancel_requested_at (worker stops it)."""
    async with atomic(pool) as conn:
        await core.cancel_job(conn, ctx.project_id, job_id)
        await audit(conn, ctx, "job.cancel", "job", job_id)
    return await store.get_job(pool, ctx.project_id, job_id)


_P = Scope.PROJECT
ROUTES: list[Route] = [
    Route("POST", BASE, enqueue_job, _P, MemberRole.MEMBER,
          "Enqueue a job (201; 200 with the existing job when the idempotency key matched)",
          response_model=JobPublic, status_code=201, rate_limit=RateLimitClass.ENQUEUE,
          tags=(TAG,)),
    Route("POST", BASE + "/bulk", enqueue_bulk, _P, MemberRole.MEMBER,
          "Enqueue many jobs atomically under one batch id", response_model=JobsBulkResult,
          status_code=201, rate_limit=RateLimitClass.ENQUEUE, tags=(TAG,)),
    Route("GET", BASE, list_project_jobs, _P, MemberRole.VIEWER,
          "List jobs (newest first) with filters", response_model=JobsPage, tags=(TAG,)),
    Route("GET", BASE + "/count", count_project_jobs, _P, MemberRole.VIEWER,
          "How many jobs the list's filters match", response_model=JobsCount, tags=(TAG,)),
    Route("GET", ONE, read_job, _P, MemberRole.VIEWER,
          "A job with its payload, executions (the retry history) and recent logs",
          response_model=JobDetail, tags=(TAG,)),
    Route("GET", ONE + "/explain", explain_job, _P, MemberRole.VIEWER,
          "Why a job is not running: its blockers (queue_paused, scheduled, "
          "waiting_on_dependencies, concurrency_limit_full, key_limit_full, rate_limited, "
          "fair_share, no_live_worker, handler_not_registered) or claimable",
          response_model=JobExplanation, tags=(TAG,)),
    Route("GET", ONE + "/logs", read_job_logs, _P, MemberRole.VIEWER,
          "A job's log lines, oldest first", response_model=JobLogsPage, tags=(TAG,)),
    Route("POST", ONE + "/retry", retry_job, _P, MemberRole.MEMBER,
          "Retry a failed, dead-lettered or cancelled job", response_model=JobPublic,
          rate_limit=RateLimitClass.ENQUEUE, tags=(TAG,)),
    Route("POST", ONE + "/cancel", cancel_job, _P, MemberRole.MEMBER,
          "Cancel a job", response_model=JobPublic, tags=(TAG,)),
]  # fmt: skip
