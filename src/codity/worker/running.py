"""The jobs a worker has in hand: what it runs, and therefore which leases its heartbeat keeps.

A job is in hand from the moment its claim's reply arrives until its outcome is recorded (or
dropped): first as a `RunningJob` here, then as an outcome in the completer's buffer. The
heartbeat extends exactly those leases, nothing else held under the worker's id.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from codity import core
from codity.worker.context import JobContext


@dataclass(eq=False, slots=True)
class RunningJob:
    job: core.ClaimedJob
    ctx: JobContext
    started_monotonic: float
    started_at: datetime
    task: asyncio.Task[None] | None = None
    #: An operator asked to cancel it: the attempt ends as `cancelled`.
    cancel_requested: bool = False
    #: Its lease is gone (reaped, claimed by someone else): stop it and record nothing.
    lease_lost: bool = False
    #: Whether the database shows this job `running` yet (see worker.marker).
    marked_running: bool = False
    #: A sync handler's thread (None for async handlers).
    thread: Future[Any] | None = None

    def watch_thread(self, thread: Future[Any]) -> None:
        self.thread = thread


class Running:
    """Running jobs by id, plus what the producer needs to size its claims."""

    def __init__(self) -> None:
        self.jobs: dict[int, RunningJob] = {}

    def __len__(self) -> int:
        return len(self.jobs)

    def get(self, job_id: int) -> RunningJob | None:
        return self.jobs.get(job_id)

    def fences(self) -> list[core.Fence]:
        return [rj.job.fence for rj in self.jobs.values()]
