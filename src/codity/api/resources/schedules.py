"""/projects/{project_id}/schedules: cron CRUD, enable/disable, trigger now, next fire times."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Header, Query, Response

from codity import core
from codity.api.deps import AppSettings, DbPool, ProjectScope
from codity.api.masking import masked
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.ratelimit import check_enqueue_quota
from codity.api.resources._params import ScheduleId
from codity.api.resources._project_audit import atomic, audit
from codity.api.routing import RateLimitClass, Route, Scope
from codity.api.schemas.common import DEFAULT_PAGE_SIZE, NO_NUL_PATTERN
from codity.api.schemas.schedules import (
    MAX_FIRE_TIMES,
    CronPreview,
    ScheduleCreate,
    SchedulePublic,
    SchedulesPage,
    ScheduleTriggered,
    ScheduleUpdate,
    ScheduleValidate,
)
from codity.api.stores import orgs
from codity.api.stores import schedules as store
from codity.domain.cron import CronSpec, check_min_interval, parse_cron
from codity.domain.states import MemberRole
from codity.settings import Settings

TAG = "schedules"
BASE = "/projects/{project_id}/schedules"
ONE = BASE + "/{schedule_id}"


async def list_project_schedules(
    ctx: ProjectScope, pool: DbPool, limit: Limit = DEFAULT_PAGE_SIZE, cursor: Cursor = None
) -> SchedulesPage:
    after = decode_cursor(cursor, datetime, uuid.UUID)
    items = await store.list_schedules(
        pool, ctx.project_id, limit=limit, after=(after[0], after[1]) if after else None
    )
    return SchedulesPage(
        items=[masked(ctx, schedule, "payload") for schedule in items],
        next_cursor=next_cursor(items, limit, lambda s: (s.created_at, s.id)),
    )


def _checked_cron(expression: str, timezone: str, settings: Settings) -> CronSpec:
    """422 `invalid_cron` for a bad expression, or one that fires more often than
    CRON_MIN_INTERVAL_S (one schedule must not be a way around the enqueue quotas)."""
    spec = parse_cron(expression, timezone)
    check_min_interval(spec, settings.cron_min_interval_s, datetime.now(UTC))
    return spec


async def create_schedule(
    ctx: ProjectScope, pool: DbPool, body: ScheduleCreate, settings: AppSettings
) -> SchedulePublic:
    spec = _checked_cron(body.cron_expression, body.timezone, settings)  # before any write
    queue = await core.resolve_queue(pool, ctx.project_id, body.queue)
    async with atomic(pool) as conn:
        await orgs.reserve_slot(conn, ctx.org_id, "schedules", settings.max_schedules_per_org)
        schedule_id = await store.create_schedule(
            conn,
            ctx.project_id,
            queue_id=queue.id,
            name=body.name,
            cron_expression=spec.expression,
            timezone=spec.timezone,
            handler=body.handler,
            payload=body.payload,
            priority=body.priority,
            enabled=body.enabled,
            created_by=ctx.principal.user_id,
        )
        await audit(conn, ctx, "schedule.create", "schedule", schedule_id, name=body.name)
    return await store.get_schedule(pool, ctx.project_id, schedule_id)


async def read_schedule(ctx: ProjectScope, pool: DbPool, schedule_id: ScheduleId) -> SchedulePublic:
    return masked(ctx, await store.get_schedule(pool, ctx.project_id, schedule_id), "payload")


async def _apply(
    ctx: ProjectScope, pool: DbPool, schedule_id: uuid.UUID, changes: dict[str, object]
) -> SchedulePublic:
    async with atomic(pool) as conn:
        await store.update_schedule(conn, ctx.project_id, schedule_id, changes)
        await audit(conn, ctx, "schedule.update", "schedule", schedule_id, fields=sorted(changes))
    return await store.get_schedule(pool, ctx.project_id, schedule_id)


async def update_schedule(
    ctx: ProjectScope,
    pool: DbPool,
    schedule_id: ScheduleId,
    body: ScheduleUpdate,
    settings: AppSettings,
) -> SchedulePublic:
    changes = body.model_dump(exclude_unset=True)
    if "cron_expression" in changes or "timezone" in changes:
        current = await store.get_schedule(pool, ctx.project_id, schedule_id)
        spec = _checked_cron(
            str(changes.get("cron_expression", current.cron_expression)),
            str(changes.get("timezone", current.timezone)),
            settings,
        )
        changes["cron_expression"] = spec.expression
    return await _apply(ctx, pool, schedule_id, changes)


async def delete_schedule(ctx: ProjectScope, pool: DbPool, schedule_id: ScheduleId) -> Response:
    async with atomic(pool) as conn:
        await store.delete_schedule(conn, ctx.project_id, schedule_id)
        await audit(conn, ctx, "schedule.delete", "schedule", schedule_id)
    return Response(status_code=204)


async def enable_schedule(
    ctx: ProjectScope, pool: DbPool, schedule_id: ScheduleId
) -> SchedulePublic:
    """Enabling computes the next fire time from now: no backlog of missed runs."""
    return await _apply(ctx, pool, schedule_id, {"enabled": True})


async def disable_schedule(
    ctx: ProjectScope, pool: DbPool, schedule_id: ScheduleId
) -> SchedulePublic:
    return await _apply(ctx, pool, schedule_id, {"enabled": False})


async def trigger_schedule(
    ctx: ProjectScope,
    pool: DbPool,
    schedule_id: ScheduleId,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(alias="Idempotency-Key", min_length=1, max_length=200, pattern=NO_NUL_PATTERN),
    ] = None,
) -> ScheduleTriggered:
    """Enqueue the schedule's job now, through `codity.core.enqueue`.

    The job's idempotency key is `manual:<schedule>:<Idempotency-Key header>`, so a client that
    retries a trigger gets the same job back (200); without the header each call is a new run.
    """
    schedule = await store.get_schedule(pool, ctx.project_id, schedule_id)
    key = f"manual:{schedule.id}:{idempotency_key or uuid.uuid4()}"
    await check_enqueue_quota(pool, ctx.project_id, ctx.org_id, 1)
    job = core.NewJob(
        handler=schedule.handler,
        payload=schedule.payload,
        priority=schedule.priority,
        idempotency_key=key,
    )
    async with atomic(pool) as conn:
        result = await core.enqueue(conn, schedule.queue_id, job, project_id=ctx.project_id)
        if result.created:
            await store.record_manual_run(conn, ctx.project_id, schedule.id, result.id)
            await audit(conn, ctx, "schedule.trigger", "schedule", schedule.id, job_id=result.id)
    response.status_code = 201 if result.created else 200
    return ScheduleTriggered(schedule_id=schedule.id, job_id=result.id, created=result.created)


async def next_fire_times(
    ctx: ProjectScope,
    pool: DbPool,
    schedule_id: ScheduleId,
    n: Annotated[int, Query(ge=1, le=MAX_FIRE_TIMES)] = 5,
) -> CronPreview:
    schedule = await store.get_schedule(pool, ctx.project_id, schedule_id)
    return _preview(schedule.cron_expression, schedule.timezone, n)


async def validate_cron(
    ctx: ProjectScope, body: ScheduleValidate, settings: AppSettings
) -> CronPreview:
    """422 `invalid_cron` with a message saying what is wrong, or the next fire times."""
    _checked_cron(body.cron_expression, body.timezone, settings)
    return _preview(body.cron_expression, body.timezone, body.n)


def _preview(expression: str, timezone: str, n: int) -> CronPreview:
    spec = parse_cron(expression, timezone)
    return CronPreview(
        cron_expression=spec.expression,
        timezone=spec.timezone,
        has_seconds=spec.has_seconds,
        next_fire_times=spec.next_after(datetime.now(UTC), n),
    )


_P = Scope.PROJECT
ROUTES: list[Route] = [
    Route("GET", BASE, list_project_schedules, _P, MemberRole.VIEWER,
          "List cron schedules", response_model=SchedulesPage, tags=(TAG,)),
    Route("POST", BASE, create_schedule, _P, MemberRole.ADMIN,
          "Create a cron schedule", response_model=SchedulePublic, status_code=201, tags=(TAG,)),
    # A POST, so it ranks as mutating in the permission matrix (member), though it writes nothing.
    Route("POST", BASE + "/validate", validate_cron, _P, MemberRole.MEMBER,
          "Check a cron expression and preview its next fire times", response_model=CronPreview,
          tags=(TAG,)),
    Route("GET", ONE, read_schedule, _P, MemberRole.VIEWER,
          "Read a schedule", response_model=SchedulePublic, tags=(TAG,)),
    Route("PATCH", ONE, update_schedule, _P, MemberRole.ADMIN,
          "Change a schedule", response_model=SchedulePublic, tags=(TAG,)),
    Route("DELETE", ONE, delete_schedule, _P, MemberRole.ADMIN,
          "Delete a schedule (jobs it enqueued stay)", status_code=204, tags=(TAG,)),
    Route("POST", ONE + "/enable", enable_schedule, _P, MemberRole.ADMIN,
          "Enable a schedule (next run computed from now)", response_model=SchedulePublic,
          tags=(TAG,)),
    Route("POST", ONE + "/disable", disable_schedule, _P, MemberRole.ADMIN,
          "Disable a schedule", response_model=SchedulePublic, tags=(TAG,)),
    Route("POST", ONE + "/trigger", trigger_schedule, _P, MemberRole.MEMBER,
          "Enqueue the schedule's job now", response_model=ScheduleTriggered, status_code=201,
          rate_limit=RateLimitClass.ENQUEUE, tags=(TAG,)),
    Route("GET", ONE + "/next", next_fire_times, _P, MemberRole.VIEWER,
          "The schedule's next N fire times", response_model=CronPreview, tags=(TAG,)),
]  # fmt: skip
