"""Queues: configuration, live depth and statistics."""

from __future__ import annotations

from datetime import datetime
from typing import Self
from uuid import UUID

from pydantic import Field, model_validator

from codity.api.schemas.common import PublicModel, RequestModel, SafeText, text_field
from codity.api.schemas.retry_policies import RetryPolicySummary
from codity.domain.flow import MAX_RATE_PERIOD_S, MIN_RATE_PERIOD_S

QUEUE_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
#: A week: a longer per-job timeout is almost certainly a unit mistake.
MAX_TIMEOUT_MS = 7 * 24 * 3600 * 1000


class RateLimit(RequestModel):
    """At most `count` jobs START in any window of `period_s` seconds, across all workers."""

    count: int = Field(ge=1, le=1_000_000)
    period_s: float = Field(ge=MIN_RATE_PERIOD_S, le=MAX_RATE_PERIOD_S)


class QueueCreate(RequestModel):
    name: str = Field(
        pattern=QUEUE_NAME_PATTERN,
        description="lowercase letters, digits, '.', '_' or '-'; up to 63 characters",
    )
    description: SafeText | None = text_field(max_length=1000, default=None)
    priority: int = Field(default=0, ge=-1000, le=1000)
    concurrency_limit: int | None = Field(
        default=None, ge=1, le=100_000, description="max jobs running at once across all workers"
    )
    retry_policy_id: UUID | None = None
    default_max_attempts: int = Field(default=3, ge=1, le=100)
    default_timeout_ms: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_MS)
    rate_limit_per_minute: int | None = Field(
        default=None, ge=1, le=1_000_000, description="the API's enqueue ceiling for this queue"
    )
    key_concurrency_limit: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="max jobs with the same concurrency_key claimed or running at once",
    )
    rate_limit: RateLimit | None = Field(
        default=None, description="claim rate limit: starts per period, across all workers"
    )
    rate_limit_per_key: bool = Field(
        default=False, description="apply rate_limit to each concurrency_key on its own"
    )

    @model_validator(mode="after")
    def _per_key_needs_a_limit(self) -> Self:
        if self.rate_limit_per_key and self.rate_limit is None:
            raise ValueError("rate_limit_per_key needs a rate_limit")
        return self


class QueueUpdate(RequestModel):
    """Only the fields present are changed; `null` clears an optional setting."""

    description: SafeText | None = text_field(max_length=1000, default=None)
    priority: int = Field(default=0, ge=-1000, le=1000)
    concurrency_limit: int | None = Field(default=None, ge=1, le=100_000)
    retry_policy_id: UUID | None = None
    default_max_attempts: int = Field(default=3, ge=1, le=100)
    default_timeout_ms: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_MS)
    rate_limit_per_minute: int | None = Field(default=None, ge=1, le=1_000_000)
    key_concurrency_limit: int | None = Field(default=None, ge=1, le=100_000)
    rate_limit: RateLimit | None = None
    rate_limit_per_key: bool = False


class QueueDepth(PublicModel):
    """How many of the queue's jobs are in each status right now."""

    waiting: int = 0
    scheduled: int = 0
    queued: int = 0
    claimed: int = 0
    running: int = 0
    completed: int = 0
    failed: int = 0
    dead_letter: int = 0
    cancelled: int = 0


class QueuePublic(PublicModel):
    id: UUID
    project_id: UUID
    name: str
    description: str | None
    priority: int
    concurrency_limit: int | None
    is_paused: bool
    draining_since: datetime | None = Field(
        description="set while draining: no new jobs; pauses itself once nothing is unfinished"
    )
    retry_policy: RetryPolicySummary | None
    default_max_attempts: int
    default_timeout_ms: int | None
    rate_limit_per_minute: int | None
    key_concurrency_limit: int | None
    rate_limit: RateLimit | None
    rate_limit_per_key: bool
    created_at: datetime
    updated_at: datetime
    depth: QueueDepth
    claimable: int = Field(description="queued, due now, and the queue is not paused")
    running: int = Field(description="claimed or running")


class QueuesPage(PublicModel):
    items: list[QueuePublic]
    next_cursor: str | None


class ThroughputBucket(PublicModel):
    minute: datetime
    completed: int
    failed: int


class DurationPercentiles(PublicModel):
    """Milliseconds; null when there is no sample in the window."""

    p50_ms: float | None
    p95_ms: float | None
    samples: int


class QueueStats(PublicModel):
    queue_id: UUID
    name: str
    is_paused: bool
    depth: QueueDepth
    claimable: int
    running: int
    throughput: list[ThroughputBucket] = Field(
        description="one bucket per minute over the last hour, oldest first (60 buckets)"
    )
    wait: DurationPercentiles = Field(description="claimed_at - run_at, last hour")
    run: DurationPercentiles = Field(description="finished_at - started_at, last hour")
