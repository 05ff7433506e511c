"""Workers as the API shows them: only those serving the caller's queues."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import Field

from codity.api.schemas.common import PublicModel
from codity.domain.states import WorkerStatus


class WorkerQueue(PublicModel):
    id: UUID
    name: str
    project_id: UUID


class WorkerPublic(PublicModel):
    id: UUID
    hostname: str
    pid: int
    version: str
    status: WorkerStatus
    capacity: int
    in_flight: int = Field(description="jobs claimed or running with this worker right now")
    lingering_threads: int = Field(
        description="sync handlers whose attempt ended (timed out or cancelled) but whose thread "
        "still runs; each holds one of the worker's slots until it returns",
    )
    started_at: datetime
    stopped_at: datetime | None
    last_heartbeat_at: datetime
    uptime_s: float = Field(description="frozen at stopped_at once the worker stopped or died")
    heartbeat_age_s: float
    queues: list[WorkerQueue] = Field(description="the caller's queues this worker serves")


class WorkersPage(PublicModel):
    items: list[WorkerPublic]
    next_cursor: str | None
