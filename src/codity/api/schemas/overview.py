"""A project at a glance: totals, throughput, workers and health."""

from __future__ import annotations

from pydantic import Field

from codity.api.schemas.common import PublicModel
from codity.api.schemas.queues import QueueDepth, ThroughputBucket


class WorkerCounts(PublicModel):
    active: int
    draining: int
    stopped: int
    dead: int


class Health(PublicModel):
    database_ok: bool
    oldest_queued_age_s: float | None = Field(
        description="age of the oldest claimable job; a growing value means too few workers"
    )
    scheduler_lag_s: float | None = Field(
        description="how overdue the most overdue delayed job or cron schedule is"
    )
    scheduler_ok: bool = Field(
        description="true while nothing is overdue by more than three scheduler ticks"
    )


class Overview(PublicModel):
    totals: QueueDepth
    queues: int
    paused_queues: int
    throughput: list[ThroughputBucket] = Field(description="last hour, one bucket per minute")
    workers: WorkerCounts
    dead_letters: int = Field(description="dead letters not yet replayed")
    health: Health
