"""Cron schedules: a job template enqueued at each fire time of a cron expression."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import Field

from codity.api.schemas.common import JsonValue, PublicModel, RequestModel, text_field

CRON_DESCRIPTION = (
    "5 fields (minute hour day month weekday), 6 with seconds first, or an alias such as @hourly"
)
TZ_DESCRIPTION = "IANA timezone the expression is read in, e.g. 'UTC' or 'Europe/Paris'"
MAX_FIRE_TIMES = 50


class ScheduleCreate(RequestModel):
    queue: str = text_field(min_length=1, max_length=100, description="queue name or id")
    name: str = text_field(min_length=1, max_length=100)
    cron_expression: str = text_field(min_length=1, max_length=200, description=CRON_DESCRIPTION)
    timezone: str = text_field(
        min_length=1, max_length=64, default="UTC", description=TZ_DESCRIPTION
    )
    handler: str = text_field(min_length=1, max_length=200)
    payload: JsonValue = Field(default_factory=dict)
    priority: int = Field(default=0, ge=-32768, le=32767)
    enabled: bool = True


class ScheduleUpdate(RequestModel):
    """Only the fields present are changed (defaults shown are not applied)."""

    name: str = text_field(min_length=1, max_length=100, default="schedule")
    cron_expression: str = text_field(
        min_length=1, max_length=200, default="* * * * *", description=CRON_DESCRIPTION
    )
    timezone: str = text_field(
        min_length=1, max_length=64, default="UTC", description=TZ_DESCRIPTION
    )
    handler: str = text_field(min_length=1, max_length=200, default="noop")
    payload: JsonValue = Field(default_factory=dict)
    priority: int = Field(default=0, ge=-32768, le=32767)
    enabled: bool = True


class ScheduleValidate(RequestModel):
    cron_expression: str = text_field(min_length=1, max_length=200, description=CRON_DESCRIPTION)
    timezone: str = text_field(
        min_length=1, max_length=64, default="UTC", description=TZ_DESCRIPTION
    )
    n: int = Field(default=5, ge=1, le=MAX_FIRE_TIMES)


class CronPreview(PublicModel):
    cron_expression: str
    timezone: str
    has_seconds: bool
    next_fire_times: list[datetime]


class SchedulePublic(PublicModel):
    id: UUID
    queue_id: UUID
    queue_name: str
    name: str
    cron_expression: str
    timezone: str
    handler: str
    payload: Any
    priority: int
    enabled: bool
    next_run_at: datetime
    last_run_at: datetime | None
    last_job_id: int | None
    created_at: datetime
    updated_at: datetime


class SchedulesPage(PublicModel):
    items: list[SchedulePublic]
    next_cursor: str | None


class ScheduleTriggered(PublicModel):
    schedule_id: UUID
    job_id: int
    created: bool = Field(description="false when the same trigger key was used before")
