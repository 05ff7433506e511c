"""Dead letters: jobs that exhausted their attempts, kept with their payload and reason."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self
from uuid import UUID

from pydantic import Field, model_validator

from codity.api.schemas.common import PublicModel, RequestModel, text_field

MAX_IDS_PER_CALL = 1000


class DeadLetterPublic(PublicModel):
    id: UUID
    job_id: int | None
    queue_id: UUID
    queue_name: str
    handler: str
    error: str = Field(description="why the job was dead-lettered (the last error)")
    attempts: int
    failed_at: datetime
    replayed_at: datetime | None
    replay_count: int
    payload: Any
    payload_size: int


class DeadLetterReason(PublicModel):
    error: str
    count: int


class DeadLettersPage(PublicModel):
    items: list[DeadLetterPublic]
    next_cursor: str | None
    total: int = Field(description="dead letters matching the filter (not only this page)")
    reasons: list[DeadLetterReason] = Field(
        description="the most frequent reasons among the dead letters matching the filter"
    )


class DeadLetterReplay(RequestModel):
    """Give `ids` to replay those, or `queue` (name or id) to replay every pending one of it."""

    ids: list[UUID] | None = Field(default=None, min_length=1, max_length=MAX_IDS_PER_CALL)
    queue: str | None = text_field(min_length=1, max_length=100, default=None)

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.ids is None) == (self.queue is None):
            raise ValueError("give exactly one of ids or queue")
        return self


class DeadLetterDiscard(RequestModel):
    ids: list[UUID] = Field(min_length=1, max_length=MAX_IDS_PER_CALL)


class ReplayResult(PublicModel):
    replayed: int
    job_ids: list[int] = Field(description="the jobs put back in their queue")


class DiscardResult(PublicModel):
    discarded: int
