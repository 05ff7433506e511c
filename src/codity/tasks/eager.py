"""Eager mode: `enqueue` runs the task at once, in the caller, with no database and no worker.

The job goes through the same checks as a real enqueue (arguments validated by the task's
model, options and payload by `core.check_new_job`), its payload makes the same JSON round
trip a worker's would, and the function gets its arguments the way a worker gives them. What
eager mode does not do: queues, delays (a delayed job runs at once), dependencies, retries
(an exception propagates to the caller, which is what a test wants to see).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from codity import core
from codity.domain.states import JobStatus
from codity.worker.context import JobContext
from codity.worker.job_logger import JobLogger

if TYPE_CHECKING:
    from codity.tasks.task import Task

#: The worker id eager contexts carry in their fence: no worker is involved.
EAGER_WORKER_ID = uuid.UUID(int=0)


@dataclass
class EagerContext(JobContext):
    """A JobContext whose progress reports are kept in memory (`progress_reports`)."""

    progress_reports: list[tuple[int, str | None]] = field(default_factory=list)

    async def progress(self, pct: int, message: str | None = None) -> bool:
        self.progress_reports.append((max(0, min(100, int(pct))), message))
        return True

    def progress_sync(self, pct: int, message: str | None = None) -> bool:
        self.progress_reports.append((max(0, min(100, int(pct))), message))
        return True


@dataclass(frozen=True)
class EagerRun:
    """One job run in eager mode: what a test may assert on."""

    task: str
    payload: Any
    result: Any
    context: EagerContext


class EagerRunner:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        #: Every job run so far, in order.
        self.runs: list[EagerRun] = []

    def _context(self, task: Task[Any, Any], job: core.NewJob, payload: Any) -> EagerContext:
        job_id = next(self._ids)
        fence = core.Fence(job_id=job_id, worker_id=EAGER_WORKER_ID, execution_seq=1)
        deadline = None
        if job.timeout_ms:
            deadline = datetime.now(UTC) + timedelta(milliseconds=job.timeout_ms)
        return EagerContext(
            job_id=job_id,
            queue_id=EAGER_WORKER_ID,
            handler=task.name,
            payload=payload,
            attempt=1,
            max_attempts=job.max_attempts or 1,
            execution_seq=1,
            deadline=deadline,
            logger=JobLogger(fence),
            cancelled=threading.Event(),
            db=None,
            _fence=fence,
        )

    def _prepare(self, task: Task[Any, Any], job: core.NewJob) -> EagerContext:
        core.check_new_job(job)
        return self._context(task, job, task.arguments.round_trip(job.payload))

    def _done(self, task: Task[Any, Any], ctx: EagerContext, result: Any) -> core.EnqueuedJob:
        self.runs.append(EagerRun(task.name, ctx.payload, result, ctx))
        return core.EnqueuedJob(id=ctx.job_id, status=JobStatus.COMPLETED, created=True)

    async def run_async(
        self, task: Task[Any, Any], jobs: list[core.NewJob]
    ) -> list[core.EnqueuedJob]:
        contexts = [self._prepare(task, job) for job in jobs]  # all validated before any runs
        done = []
        handler = task.handler()
        for ctx in contexts:
            result = handler(ctx)
            if asyncio.iscoroutine(result):
                result = await result
            done.append(self._done(task, ctx, result))
        return done

    def run_sync(self, task: Task[Any, Any], jobs: list[core.NewJob]) -> list[core.EnqueuedJob]:
        contexts = [self._prepare(task, job) for job in jobs]
        done = []
        handler = task.handler()
        for ctx in contexts:
            result = handler(ctx)
            if asyncio.iscoroutine(result):
                result = asyncio.run(result)  # an async task enqueued from sync code
            done.append(self._done(task, ctx, result))
        return done
