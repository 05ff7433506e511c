"""Eager mode: `enqueue` runs the task at once, in the caller, with no database and no worker.

The job goes through the same checks as a real enqueue (arguments validated by the task's
model, options and payload by `core.check_new_job`), its payload makes the same JSON round
trip a worker's would, and the function gets its arguments the way a worker gives them.

Idempotency keys and unique jobs follow a real enqueue's rules, per queue, against the jobs
this runner has run (all of them `completed`, since each ran at once):

- a repeated `idempotency_key` does not run again: it returns the first job (its id, status
  `completed`) with `created=False`;
- a unique enqueue (`unique_for_s`) matches an earlier job of the same unique key (default: a
  hash of the handler and the payload) created less than `unique_for_s` ago and in one of
  `unique_states`. The default states are the unfinished ones, which an eager job never is
  once it has run, so by default a second enqueue runs again, as it would after a worker had
  finished the first; with `unique_states` that include `completed` it returns the first job
  with `created=False`. Within one `enqueue_many` call a repeated key gets the call's first
  job, as in the database.

What eager mode does not do: queues, delays (a delayed job runs at once), dependencies,
retries (an exception propagates to the caller, which is what a test wants to see; a job
that raised is not remembered, so its key does not match later).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
import time
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from codity import core
from codity.core.validation import check_unique
from codity.domain.flow import default_unique_key
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


@dataclass(frozen=True)
class _Remembered:
    """A job this runner ran: what a later idempotency or unique key can match."""

    job_id: int
    status: JobStatus
    at: float  # time.monotonic() when it was enqueued


class EagerRunner:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        #: Every job run so far, in order.
        self.runs: list[EagerRun] = []
        #: (queue, idempotency key) -> the job it made.
        self._idempotent: dict[tuple[str, str], _Remembered] = {}
        #: (queue, unique key) -> the newest job of that key.
        self._unique: dict[tuple[str, str], _Remembered] = {}

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

    def _prepare(self, task: Task[Any, Any], job: core.NewJob) -> core.NewJob:
        core.check_new_job(job)
        return job

    def _match(
        self, task: Task[Any, Any], job: core.NewJob, in_call: dict[tuple[str, str], int]
    ) -> core.EnqueuedJob | None:
        """The earlier job this one's unique or idempotency key returns, if any."""
        now = time.monotonic()
        unique = check_unique(job.unique_for_s, job.unique_key, job.unique_states)
        if unique is not None:
            key = (task.queue, job.unique_key or default_unique_key(job.handler, job.payload))
            if key in in_call:
                return core.EnqueuedJob(in_call[key], JobStatus.COMPLETED, created=False)
            window_ms, states = unique
            seen = self._unique.get(key)
            if seen is not None and (now - seen.at) * 1000 < window_ms and seen.status in states:
                return core.EnqueuedJob(seen.job_id, seen.status, created=False)
        if job.idempotency_key is not None:
            seen = self._idempotent.get((task.queue, job.idempotency_key))
            if seen is not None:
                return core.EnqueuedJob(seen.job_id, seen.status, created=False)
        return None

    def _start(self, task: Task[Any, Any], job: core.NewJob) -> tuple[EagerContext, float]:
        at = time.monotonic()
        return self._context(task, job, task.arguments.round_trip(job.payload)), at

    def _done(
        self,
        task: Task[Any, Any],
        job: core.NewJob,
        started: tuple[EagerContext, float],
        result: Any,
        in_call: dict[tuple[str, str], int],
    ) -> core.EnqueuedJob:
        """Record a run, and remember its keys for the jobs enqueued after it."""
        ctx, at = started
        self.runs.append(EagerRun(task.name, ctx.payload, result, ctx))
        remembered = _Remembered(ctx.job_id, JobStatus.COMPLETED, at)
        if job.idempotency_key is not None:
            self._idempotent.setdefault((task.queue, job.idempotency_key), remembered)
        if job.unique_for_s is not None:
            key = (task.queue, job.unique_key or default_unique_key(job.handler, job.payload))
            self._unique[key] = remembered
            in_call.setdefault(key, ctx.job_id)
        return core.EnqueuedJob(id=ctx.job_id, status=JobStatus.COMPLETED, created=True)

    async def run_async(
        self, task: Task[Any, Any], jobs: list[core.NewJob]
    ) -> list[core.EnqueuedJob]:
        checked = [self._prepare(task, job) for job in jobs]  # all validated before any runs
        done = []
        handler = task.handler()
        in_call: dict[tuple[str, str], int] = {}
        for job in checked:
            made = self._match(task, job, in_call)
            if made is None:
                started = self._start(task, job)
                result = handler(started[0])
                if asyncio.iscoroutine(result):
                    result = await result
                made = self._done(task, job, started, result, in_call)
            done.append(made)
        return done

    def run_sync(self, task: Task[Any, Any], jobs: list[core.NewJob]) -> list[core.EnqueuedJob]:
        checked = [self._prepare(task, job) for job in jobs]
        done = []
        handler = task.handler()
        in_call: dict[tuple[str, str], int] = {}
        for job in checked:
            made = self._match(task, job, in_call)
            if made is None:
                started = self._start(task, job)
                result = handler(started[0])
                if asyncio.iscoroutine(result):
                    result = run_coroutine(result)  # an async task enqueued from sync code
                made = self._done(task, job, started, result, in_call)
            done.append(made)
        return done


def run_coroutine(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run an async task's coroutine to its end from sync code. With no event loop running in
    this thread, `asyncio.run`; inside one (a sync helper called from async code: asyncio.run
    would refuse), on a loop of its own in a helper thread, as a worker runs it on its loop,
    with the caller's context variables. The caller waits (its loop too, as the real
    `enqueue_sync` makes it wait for the database): `await task.enqueue(...)` does not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    context = contextvars.copy_context()
    with ThreadPoolExecutor(1, thread_name_prefix="codity-eager") as thread:
        return thread.submit(context.run, asyncio.run, coro).result()
