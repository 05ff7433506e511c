"""Bulk actions: one action (retry, cancel, delete / replay, discard) on every job or dead
letter a filter matches, or on listed ids, run by the API in chunks."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Self
from uuid import UUID

from pydantic import AwareDatetime, Field, model_validator

from codity.api.schemas.common import PublicModel, RequestModel, text_field
from codity.api.schemas.jobs import MAX_JOB_ID
from codity.domain.states import JobStatus

#: Ids one request may list (a filter has no bound: it is walked in chunks).
MAX_BULK_IDS = 10_000


class BulkActionStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    STOPPED = "stopped"
    FAILED = "failed"


class JobsFilter(RequestModel):
    """The filters of `GET /jobs` (same names and meaning)."""

    queue: str | None = text_field(
        min_length=1, max_length=100, default=None, description="queue name or id"
    )
    status: list[JobStatus] | None = Field(default=None, max_length=len(JobStatus))
    handler: str | None = text_field(min_length=1, max_length=200, default=None)
    created_after: AwareDatetime | None = None
    created_before: AwareDatetime | None = None
    batch_id: UUID | None = None
    q: str | None = text_field(
        min_length=1,
        max_length=255,
        default=None,
        description="a job id, or part of an idempotency key",
    )
    payload: str | None = text_field(
        min_length=3,
        max_length=500,
        default=None,
        description="payload search `path = value`, e.g. `customer_id = 42`",
    )
    error: str | None = text_field(
        min_length=1, max_length=200, default=None, description="words of the last error"
    )


class DeadLettersFilter(RequestModel):
    """The filters of `GET /dead-letters`."""

    queue: str | None = text_field(
        min_length=1, max_length=100, default=None, description="queue name or id"
    )
    include_replayed: bool = False


JobIdItem = Annotated[int, Field(ge=1, le=MAX_JOB_ID)]


class _OneOf(RequestModel):
    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (getattr(self, "filter") is None) == (getattr(self, "ids") is None):  # noqa: B009
            raise ValueError("give exactly one of filter or ids")
        return self


class JobsBulkActionCreate(_OneOf):
    """`filter` (every job it matches now; jobs enqueued later are not included) or `ids`."""

    action: Literal["retry", "cancel", "delete"]
    filter: JobsFilter | None = None
    ids: list[JobIdItem] | None = Field(default=None, min_length=1, max_length=MAX_BULK_IDS)


class DeadLettersBulkActionCreate(_OneOf):
    action: Literal["replay", "discard"]
    filter: DeadLettersFilter | None = None
    ids: list[UUID] | None = Field(default=None, min_length=1, max_length=MAX_BULK_IDS)


class BulkActionPublic(PublicModel):
    id: UUID
    target: Literal["jobs", "dead_letters"]
    action: Literal["retry", "cancel", "delete", "replay", "discard"]
    status: BulkActionStatus
    filter: dict[str, Any] | None = Field(description="the filter, frozen at creation")
    ids_count: int | None = Field(description="how many ids were listed (null with a filter)")
    matched: int = Field(description="rows the filter (or the ids) matched at creation")
    processed: int = Field(description="rows the action changed")
    skipped: int = Field(
        description="matched rows left alone: in a state the action does not apply to, "
        "or locked by a worker at that instant"
    )
    chunks: int = Field(description="transactions run so far (each at most BULK_ACTION_CHUNK rows)")
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime


class BulkActionsPage(PublicModel):
    items: list[BulkActionPublic]
    next_cursor: str | None


class JobsCount(PublicModel):
    count: int = Field(description="jobs the filter matches")
