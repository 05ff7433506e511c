"""Retry policies: how a failed job is retried (strategy, delays, attempts)."""

from __future__ import annotations

from datetime import datetime
from typing import Self
from uuid import UUID

from pydantic import Field, model_validator

from codity.api.schemas.common import PublicModel, RequestModel, text_field
from codity.domain.states import BackoffStrategy

#: A day: longer backoffs are better expressed as a schedule.
MAX_DELAY_MS = 86_400_000


class RetryPolicyCreate(RequestModel):
    name: str = text_field(min_length=1, max_length=100)
    strategy: BackoffStrategy = BackoffStrategy.EXPONENTIAL
    base_delay_ms: int = Field(default=1000, ge=0, le=MAX_DELAY_MS)
    max_delay_ms: int = Field(default=60_000, ge=0, le=MAX_DELAY_MS)
    max_attempts: int = Field(default=3, ge=1, le=100)
    jitter: bool = True

    @model_validator(mode="after")
    def _delays(self) -> Self:
        if self.max_delay_ms < self.base_delay_ms:
            raise ValueError("max_delay_ms must be at least base_delay_ms")
        return self


class RetryPolicyUpdate(RequestModel):
    """Only the fields present are changed (defaults shown are not applied)."""

    name: str = text_field(min_length=1, max_length=100, default="policy")
    strategy: BackoffStrategy = BackoffStrategy.EXPONENTIAL
    base_delay_ms: int = Field(default=1000, ge=0, le=MAX_DELAY_MS)
    max_delay_ms: int = Field(default=60_000, ge=0, le=MAX_DELAY_MS)
    max_attempts: int = Field(default=3, ge=1, le=100)
    jitter: bool = True


class RetryPolicySummary(PublicModel):
    id: UUID
    name: str
    strategy: BackoffStrategy
    max_attempts: int


class RetryPolicyPublic(PublicModel):
    id: UUID
    project_id: UUID
    name: str
    strategy: BackoffStrategy
    base_delay_ms: int
    max_delay_ms: int
    max_attempts: int
    jitter: bool
    created_at: datetime
    queue_count: int = Field(description="queues using this policy by default")


class RetryPoliciesPage(PublicModel):
    items: list[RetryPolicyPublic]
    next_cursor: str | None
