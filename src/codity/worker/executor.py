"""The executor: one task per claimed job; each attempt is found, run, judged and handed on.

`run_attempt` runs one attempt: find the handler, run it under the job's timeout, judge the
result. Whatever the handler does (raise, hang, return something that is not JSON) becomes a
`Failure` of this attempt only; nothing a handler does can crash the worker. `Executor` starts
those attempts for the producer's claims and hands each outcome to the completer, unless the
job's lease was lost meanwhile: then the handler is cancelled (async) or its outcome discarded
(sync, its thread cannot be interrupted), "lease lost" is logged, and nothing is recorded.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from codity import core, tracing
from codity.worker.completer import Completer, Finished
from codity.worker.context import CancelFlag, JobContext
from codity.worker.job_logger import JobLogger
from codity.worker.registry import HandlerRegistry, RegisteredHandler
from codity.worker.running import Running, RunningJob

log = structlog.get_logger("codity.worker")

Outcome = core.Completion | core.Failure

#: Stored errors and tracebacks are bounded: they are for people, not archives.
MAX_ERROR_CHARS = 2000
MAX_TRACEBACK_CHARS = 8000


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_exception(exc: BaseException) -> str:
    message = str(exc)
    return _clip(
        f"{type(exc).__name__}: {message}" if message else type(exc).__name__, MAX_ERROR_CHARS
    )


async def _call(
    registered: RegisteredHandler,
    ctx: JobContext,
    threads: ThreadPoolExecutor,
    on_thread: Callable[[Future[Any]], None] | None,
) -> Any:
    if registered.is_async:
        return await registered.fn(ctx)
    # In a copy of this context: spans (and other context variables) set for the attempt reach
    # the handler in its thread.
    submitted = threads.submit(contextvars.copy_context().run, registered.fn, ctx)
    if on_thread is not None:
        on_thread(submitted)  # the executor watches the thread outlive its attempt
    result = await asyncio.wrap_future(submitted)
    if inspect.isawaitable(result):  # a plain function that returned a coroutine
        result = await result
    return result


async def run_attempt(
    ctx: JobContext,
    *,
    timeout_ms: int | None,
    registry: HandlerRegistry,
    threads: ThreadPoolExecutor,
    cancel_requested: Callable[[], bool],
    started_at: datetime | None = None,
    tracer: Any = None,
    on_thread: Callable[[Future[Any]], None] | None = None,
) -> Outcome:
    """Run the handler for `ctx`'s job. Re-raises `CancelledError` unless a cancel was requested
    (the drain and a lost lease cancel attempts that must produce no outcome).

    With a `tracer` (codity[otel] and a configured provider: `tracing.worker_tracer()`) the
    attempt is a span linked to the enqueuing one; without, this costs one `is None` check."""
    if tracer is None:
        return await _run_attempt(
            ctx, timeout_ms, registry, threads, cancel_requested, started_at, on_thread
        )
    with tracing.attempt_span(
        tracer,
        handler=ctx.handler,
        job_id=ctx.job_id,
        attempt=ctx.attempt,
        queue_id=ctx.queue_id,
        trace_parent=ctx.trace_parent,
    ) as span:
        ctx.logger.trace_id = tracing.trace_id_of(span)
        outcome = await _run_attempt(
            ctx, timeout_ms, registry, threads, cancel_requested, started_at, on_thread
        )
        if isinstance(outcome, core.Failure):
            tracing.mark_failed(span, outcome.error)
        return outcome


async def _run_attempt(
    ctx: JobContext,
    timeout_ms: int | None,
    registry: HandlerRegistry,
    threads: ThreadPoolExecutor,
    cancel_requested: Callable[[], bool],
    started_at: datetime | None,
    on_thread: Callable[[Future[Any]], None] | None,
) -> Outcome:
    fence = ctx.fence
    registered = registry.get(ctx.handler)
    if registered is None:
        known = ", ".join(registry.names()) or "none"
        return core.Failure(
            fence=fence,
            error=f"unknown handler {ctx.handler!r}: no handler of that name is registered on "
            f"this worker (registered: {known})",
            kind="unknown_handler",
            started_at=started_at,
        )
    scope = asyncio.timeout(timeout_ms / 1000) if timeout_ms else None
    try:
        if scope is None:
            # An async handler is awaited right here: one coroutine frame less per job.
            if registered.is_async:
                result = await registered.fn(ctx)
            else:
                result = await _call(registered, ctx, threads, on_thread)
        else:
            async with scope:
                result = await _call(registered, ctx, threads, on_thread)
    except TimeoutError as exc:
        if scope is not None and scope.expired():
            ctx.cancelled.set()  # a sync handler still running in its thread may watch this
            return core.Failure(
                fence=fence,
                error=f"timed out after {timeout_ms} ms",
                kind="timeout",
                started_at=started_at,
            )
        return _failure(fence, exc, started_at)
    except asyncio.CancelledError:
        ctx.cancelled.set()
        if not cancel_requested():
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return core.Failure(
            fence=fence, error="cancelled on request", kind="cancelled", started_at=started_at
        )
    except Exception as exc:
        return _failure(fence, exc, started_at)
    if result is not None and not isinstance(result, (str, int, bool)):
        try:
            json.dumps(result, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return core.Failure(
                fence=fence,
                error=_clip(
                    f"handler returned a result that is not JSON-serialisable "
                    f"({type(result).__name__}): {exc}",
                    MAX_ERROR_CHARS,
                ),
                started_at=started_at,
            )
    return core.Completion(fence=fence, result=result, started_at=started_at)


def _failure(fence: core.Fence, exc: BaseException, started_at: datetime | None) -> core.Failure:
    tb = "".join(traceback.format_exception(exc))
    return core.Failure(
        fence=fence,
        error=describe_exception(exc),
        traceback=_clip(tb, MAX_TRACEBACK_CHARS),
        started_at=started_at,
    )


class Executor:
    def __init__(
        self,
        *,
        registry: HandlerRegistry,
        threads: ThreadPoolExecutor,
        running: Running,
        completer: Completer,
        slot_freed: Callable[[], None],
        db: Any,
        tracer: Any = None,
    ) -> None:
        self._registry = registry
        #: A span per attempt when codity[otel] is installed and a tracer provider is set.
        self._tracer = tracer
        self._threads = threads
        self._running = running
        self._completer = completer
        self._slot_freed = slot_freed
        self._db = db
        #: Threads of sync handlers whose attempt ended (timed out, cancelled, lease lost) while
        #: the thread ran on: Python cannot stop a thread, so each keeps a pool thread, and a
        #: slot, until its handler returns. The producer counts them as busy slots.
        self.lingering: set[Future[Any]] = set()
        # Checked once: even a filtered-out call through the lazy logger proxy binds a new
        # logger, measurable at thousands of jobs a second.
        self._log_each_job = bool(log.bind().is_enabled_for(logging.DEBUG))

    def start(self, claimed: list[core.ClaimedJob], *, lease_deadline: float) -> None:
        """One task per job; each is in hand (`running`) before this returns.
        `lease_deadline`: time.monotonic() by which their new leases surely still hold (see
        RunningJob.lease_deadline)."""
        loop = asyncio.get_running_loop()
        started_at = datetime.now(UTC)
        now = time.monotonic()
        for job in claimed:
            if job.execution_seq > 1:
                # Claimed again while an earlier attempt still runs here (its lease was reaped
                # during an outage): that attempt's lease is certainly gone, so it stops now,
                # before the new one starts, not at the next heartbeat. A first attempt
                # (execution_seq 1, nearly every claim) cannot have one.
                for stale in self._running.of_job(job.id):
                    if stale.job.execution_seq < job.execution_seq:
                        self.lose(stale.job.fence)
            rj = RunningJob(
                job=job,
                ctx=self._context(job, loop, now),
                started_monotonic=now,
                started_at=started_at,
                lease_deadline=lease_deadline,
            )
            self._running.jobs[job.id, job.execution_seq] = rj
            rj.task = loop.create_task(self._execute(rj))

    def _context(
        self, job: core.ClaimedJob, loop: asyncio.AbstractEventLoop, now: float
    ) -> JobContext:
        deadline = deadline_monotonic = None
        if job.timeout_ms:
            deadline = datetime.now(UTC) + timedelta(milliseconds=job.timeout_ms)
            deadline_monotonic = now + job.timeout_ms / 1000
        fence = job.fence
        # Positional, in JobContext's field order (made for every job: keywords cost more).
        return JobContext(
            job.id,
            job.queue_id,
            job.handler,
            job.payload,
            job.attempt,
            job.max_attempts,
            job.execution_seq,
            deadline,
            JobLogger(fence),
            CancelFlag(),
            self._db,
            job.trace_parent,
            fence,
            loop,
            deadline_monotonic,
        )

    async def _execute(self, rj: RunningJob) -> None:
        try:
            # Through run_attempt, the tracing hook (one `tracer is None` test without a tracer:
            # `codity bench tracing` measures it against a drain with the hook bypassed).
            outcome = await run_attempt(
                rj.ctx,
                timeout_ms=rj.job.timeout_ms,
                registry=self._registry,
                threads=self._threads,
                cancel_requested=rj.cancel_expected,
                started_at=rj.started_at,
                tracer=self._tracer,
                on_thread=rj.watch_thread,
            )
        except asyncio.CancelledError:
            return  # drained (released by the drain) or lease lost: no outcome
        finally:
            self._running.jobs.pop((rj.job.id, rj.job.execution_seq), None)
            if rj.thread is not None and not rj.thread.done():
                self._linger(rj)
            self._slot_freed()
        if rj.lease_lost:
            return  # a sync handler finished after its lease was lost: discarded
        self._completer.submit(Finished(outcome=outcome, logger=rj.ctx.logger))
        # debug, not info: at thousands of jobs a second, rendering a line per job costs more
        # than running it. Outcomes are in job_executions; failures are logged by the completer.
        if self._log_each_job:
            log.debug(
                "job finished",
                job_id=rj.job.id,
                handler=rj.job.handler,
                attempt=rj.job.attempt,
                outcome="completed" if isinstance(outcome, core.Completion) else outcome.kind,
                duration_ms=round((time.monotonic() - rj.started_monotonic) * 1000, 1),
            )

    def _linger(self, rj: RunningJob) -> None:
        thread = rj.thread
        assert thread is not None
        loop = asyncio.get_running_loop()
        self.lingering.add(thread)
        log.warning(
            "sync handler still running after its attempt ended; its thread holds a slot "
            "until it returns",
            job_id=rj.job.id,
            handler=rj.job.handler,
            lingering=len(self.lingering),
        )

        def gone(_: Future[Any]) -> None:
            self.lingering.discard(thread)
            self._slot_freed()

        thread.add_done_callback(lambda f: loop.call_soon_threadsafe(gone, f))

    def cancel(self, fence: core.Fence) -> None:
        """An operator asked to cancel this job: the attempt ends as `cancelled`."""
        rj = self._running.get(fence)
        if rj is None or rj.cancel_requested:
            return
        log.info("cancel requested; cancelling handler", job_id=fence.job_id)
        rj.cancel_requested = True
        rj.ctx.cancelled.set()
        if rj.task is not None:
            rj.task.cancel()

    def lose(self, fence: core.Fence) -> None:
        """The attempt's lease is gone: cancel the handler (async) or discard its outcome
        (sync). Nothing of this attempt is recorded: someone else may hold the job now."""
        rj = self._running.get(fence)
        if rj is None or rj.lease_lost:
            return
        log.warning(
            "lease lost; handler cancelled, its outcome will not be recorded",
            job_id=fence.job_id,
            execution_seq=fence.execution_seq,
        )
        rj.lease_lost = True
        rj.ctx.cancelled.set()
        if rj.task is not None:
            rj.task.cancel()
