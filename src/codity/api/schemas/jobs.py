"""Jobs: enqueue (one or many), lists, detail with the retry history and logs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self
from uuid import UUID

from pydantic import AwareDatetime, Field, model_validator

from codity.api.schemas.common import JsonValue, PublicModel, RequestModel, text_field
from codity.api.schemas.queues import MAX_TIMEOUT_MS
from codity.domain.flow import MAX_FLOW_KEY_LEN, MAX_UNIQUE_FOR_S, Blocker
from codity.domain.states import ExecutionStatus, JobStatus

#: Largest job id PostgreSQL's bigint holds; larger path values are refused, not overflowed.
MAX_JOB_ID = 2**63 - 1
#: Jobs per bulk request: one request, one transaction; bigger batches belong in several calls.
MAX_BULK_JOBS = 1000
#: A year: a job delayed longer is almost certainly a unit mistake.
MAX_DELAY_S = 366 * 24 * 3600.0
MAX_DEPENDENCIES = 100


class JobFields(RequestModel):
    handler: str = text_field(min_length=1, max_length=200, description="registered handler name")
    payload: JsonValue = Field(
        default_factory=dict, description="any JSON value, at most 64 KB serialised"
    )
    priority: int = Field(default=0, ge=-32768, le=32767, description="higher runs first")
    delay_s: float | None = Field(
        default=None, ge=0, le=MAX_DELAY_S, description="run this many seconds from now"
    )
    run_at: AwareDatetime | None = Field(default=None, description="run at this instant")
    idempotency_key: str | None = text_field(
        min_length=1,
        max_length=255,
        default=None,
        description="a repeat with the same key in the same queue returns the existing job",
    )
    timeout_ms: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_MS)
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    retry_policy_id: UUID | None = None
    depends_on: list[int] = Field(
        default_factory=list,
        max_length=MAX_DEPENDENCIES,
        description="job ids that must complete first",
    )
    concurrency_key: str | None = text_field(
        min_length=1,
        max_length=MAX_FLOW_KEY_LEN,
        default=None,
        description="jobs sharing a key share the queue's key_concurrency_limit "
        "(and, with rate_limit_per_key, a rate limit)",
    )
    unique_for_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_UNIQUE_FOR_S,
        description="unique job: a job of the queue with the same unique_key created this many "
        "seconds ago or less, in one of unique_states, is returned instead of a new one",
    )
    unique_key: str | None = text_field(
        min_length=1,
        max_length=MAX_FLOW_KEY_LEN,
        default=None,
        description="with unique_for_s; default: a hash of handler + payload",
    )
    unique_states: list[JobStatus] | None = Field(
        default=None,
        min_length=1,
        description="with unique_for_s; the states a match may be in (default: not finished "
        "- waiting, scheduled, queued, claimed, running)",
    )

    @model_validator(mode="after")
    def _one_time(self) -> Self:
        if self.delay_s is not None and self.run_at is not None:
            raise ValueError("give delay_s or run_at, not both")
        if self.unique_for_s is None and (
            self.unique_key is not None or self.unique_states is not None
        ):
            raise ValueError("unique_key and unique_states need unique_for_s")
        if any(not 1 <= dep <= MAX_JOB_ID for dep in self.depends_on):
            raise ValueError("depends_on holds job ids, which are positive 64-bit integers")
        return self


class JobCreate(JobFields):
    queue: str = text_field(min_length=1, max_length=100, description="queue name or id")
    batch_id: UUID | None = None


class JobBulkItem(JobFields):
    queue: str | None = text_field(
        min_length=1, max_length=100, default=None, description="defaults to the request's queue"
    )


class JobsBulkCreate(RequestModel):
    queue: str | None = text_field(
        min_length=1, max_length=100, default=None, description="queue for items naming none"
    )
    batch_id: UUID | None = Field(default=None, description="generated when absent")
    jobs: list[JobBulkItem] = Field(min_length=1, max_length=MAX_BULK_JOBS)

    @model_validator(mode="after")
    def _every_job_has_a_queue(self) -> Self:
        if self.queue is None and any(job.queue is None for job in self.jobs):
            raise ValueError("name a queue for the request or for every job")
        return self


class EnqueuedJobPublic(PublicModel):
    id: int
    queue_id: UUID
    status: JobStatus
    created: bool = Field(
        description="false when an idempotency key or a unique key matched an existing job"
    )


class JobsBulkResult(PublicModel):
    batch_id: UUID
    jobs: list[EnqueuedJobPublic]


class JobPublic(PublicModel):
    id: int
    queue_id: UUID
    queue_name: str
    handler: str
    status: JobStatus
    priority: int
    attempt: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    updated_at: datetime
    claimed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    idempotency_key: str | None
    batch_id: UUID | None
    schedule_id: UUID | None
    worker_id: UUID | None
    timeout_ms: int | None
    progress: int | None
    last_error: str | None
    cancel_requested_at: datetime | None
    concurrency_key: str | None
    unique_key: str | None


class JobsPage(PublicModel):
    items: list[JobPublic]
    next_cursor: str | None


class ExecutionPublic(PublicModel):
    """One attempt: the retry history is the list of these."""

    execution_seq: int
    attempt: int
    status: ExecutionStatus
    worker_id: UUID | None
    claimed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime
    duration_ms: float | None
    error: str | None
    traceback: str | None


class JobLogPublic(PublicModel):
    id: int
    execution_seq: int
    level: str
    message: str
    fields: dict[str, Any]
    created_at: datetime


class JobLogsPage(PublicModel):
    items: list[JobLogPublic]
    next_cursor: str | None


class JobDetail(JobPublic):
    payload: Any
    payload_size: int = Field(description="bytes of the serialised payload")
    payload_keys: list[str] | None = Field(
        description="top-level keys when the payload is an object"
    )
    result: Any
    progress_message: str | None
    execution_seq: int
    lock_expires_at: datetime | None
    retry_policy_id: UUID | None
    depends_on: list[int]
    pending_dependencies: int
    executions: list[ExecutionPublic]
    logs: list[JobLogPublic] = Field(description="the most recent log lines, oldest first")


class JobBlocker(PublicModel):
    """One reason a job is not running (or `claimable`: nothing holds it back)."""

    code: Blocker
    message: str
    data: dict[str, Any] = Field(
        description="the facts behind it: job_ids holding slots, run_at, next_slot_at, counts..."
    )


class JobExplanation(PublicModel):
    job_id: int
    status: JobStatus
    checked_at: datetime
    blockers: list[JobBlocker] = Field(
        description="empty when the job is running or finished; otherwise every reason it "
        "waits, or one `claimable` entry"
    )
