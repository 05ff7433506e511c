"""The dashboard's charts: a window of per-bucket points read from the rollup tables."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from uuid import UUID

from pydantic import Field

from codity.api.schemas.common import PublicModel


class ChartWindow(StrEnum):
    HOUR = "1h"
    DAY = "24h"
    WEEK = "7d"


class QueuePoint(PublicModel):
    at: datetime = Field(description="start of the bucket")
    completed: int
    failed: int
    depth: int | None = Field(description="waiting + scheduled + queued, sampled; null: no sample")
    running: int | None
    wait_p50_ms: float | None = Field(description="run_at -> handler start")
    wait_p95_ms: float | None


class HandlerPoint(PublicModel):
    at: datetime
    completed: int
    failed: int
    run_p50_ms: float | None = Field(description="handler start -> finish")
    run_p95_ms: float | None


class HandlerSeries(PublicModel):
    queue_id: UUID
    queue_name: str
    handler: str
    completed: int = Field(description="over the whole window")
    failed: int
    run_p50_ms: float | None = Field(description="over the whole window")
    run_p95_ms: float | None
    points: list[HandlerPoint]


class WorkerPoint(PublicModel):
    at: datetime
    completed: int
    failed: int
    in_flight: int | None = Field(description="this project's jobs leased to it, sampled")


class WorkerSeries(PublicModel):
    worker_id: UUID
    hostname: str
    pid: int
    status: str
    points: list[WorkerPoint]


class Charts(PublicModel):
    window: ChartWindow
    bucket_minutes: int = Field(description="minutes per point: 1 (1h), 15 (24h) or 60 (7d)")
    start: datetime
    queue: list[QueuePoint] = Field(description="the selected queues together, one per bucket")
    handlers: list[HandlerSeries]
    workers: list[WorkerSeries]
