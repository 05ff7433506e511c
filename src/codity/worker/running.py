"""The jobs a worker has in hand: what it runs, and therefore which leases its heartbeat keeps.

A job is in hand from the moment its claim's reply arrives until its outcome is recorded (or
dropped): first as a `RunningJob` here, then as an outcome in the completer's buffer. The
heartbeat extends exactly those leases, nothing else held under the worker's id.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

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
    #: time.monotonic() by which the lease surely still holds: when the claim or the last
    #: heartbeat that extended it was *sent*, plus the lease (the database counts its lease
    #: from later, its own now()). Past it, the reaper may hand the job to someone else
    #: (worker.lease_guard stops the attempt first).
    lease_deadline: float = float("inf")

    def watch_thread(self, thread: Future[Any]) -> None:
        self.thread = thread

    def cancel_expected(self) -> bool:
        """A cancellation of this attempt that must end it as `cancelled` (an operator's), not
        one that must leave no outcome (a lost lease, the drain)."""
        return self.cancel_requested and not self.lease_lost


class Running:
    """Running attempts by fence, plus what the producer needs to size its claims.

    By fence, not by job id: after an outage longer than the lease, the reaper may have given
    a job this worker still runs back to the queue, and this same worker may claim it again.
    Both attempts are then running here until the heartbeat finds the first one's lease gone
    and stops it; each must be counted (capacity) and stopped on its own."""

    def __init__(self) -> None:
        #: By (job id, execution_seq): the fence within this worker (a tuple of ints hashes in
        #: C; the Fence dataclass's hash, with its UUID, costs a microsecond a job).
        self.jobs: dict[tuple[int, int], RunningJob] = {}
        #: Attempts the drain stopped and is giving back: still in hand until released, so a
        #: heartbeat meanwhile neither gives them back as strays nor lets their leases lapse.
        self.releasing: list[core.Fence] = []

    def __len__(self) -> int:
        return len(self.jobs)

    def get(self, fence: core.Fence) -> RunningJob | None:
        return self.jobs.get((fence.job_id, fence.execution_seq))

    def of_job(self, job_id: int) -> list[RunningJob]:
        return [rj for rj in self.jobs.values() if rj.job.id == job_id]

    def fences(self) -> list[core.Fence]:
        return [*(rj.job.fence for rj in self.jobs.values()), *self.releasing]

    def by_queue(self) -> Counter[UUID]:
        """Running attempts per queue (a fair claim weighs them: core.Claimer.claim)."""
        return Counter(rj.job.queue_id for rj in self.jobs.values())
