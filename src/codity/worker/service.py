"""The worker process: producer, executor, completer, heartbeat, notifier, drain.

    notifier --wake--> producer --claim(limit = free slots)--> executor tasks
    executor --outcome--> completer --complete/fail in batches--> PostgreSQL
    heartbeat: every WORKER_HEARTBEAT_MS one statement extends every lease this worker holds
               and brings back cancel requests, which are delivered to the running handlers.

Every state change goes through `codity.core`; this module only decides *when* to call it.
The producer never holds more jobs than the worker has free slots, so a job is never leased to
a worker that cannot start it at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

import structlog

from codity import core
from codity.db.pool import create_pool
from codity.db.reconnect import Backoff, is_transient, sleep_or_stop, wait_any
from codity.domain.states import WorkerStatus
from codity.worker.completer import Completer, Finished
from codity.worker.config import WorkerConfig
from codity.worker.context import JobContext
from codity.worker.executor import run_attempt
from codity.worker.job_logger import JobLogger
from codity.worker.notifier import Notifier
from codity.worker.registry import HandlerRegistry

log = structlog.get_logger("codity.worker")
T = TypeVar("T")

#: Pool size: producer, completer, heartbeat and handlers that read the database share it.
POOL_MAX_SIZE = 6
#: How long the drain keeps trying to hand unfinished jobs back when the database is away.
RELEASE_DEADLINE_S = 10.0
#: A job is marked `running` in the database once its handler has run this long. Most jobs of a
#: busy queue finish sooner and go straight from `claimed` to `completed` (an allowed edge), with
#: their real start time recorded by the completion: one UPDATE per job saved on the hot path,
#: while anything an operator could watch running still shows as running within 0.1 s.
MARK_RUNNING_AFTER_S = 0.1


@dataclass(eq=False)
class RunningJob:
    job: core.ClaimedJob
    ctx: JobContext
    task: asyncio.Task[None] | None = None
    cancel_requested: bool = False
    started_monotonic: float = 0.0
    started_at: datetime | None = None
    #: Whether the database shows this job `running` yet (see MARK_RUNNING_AFTER_S).
    marked_running: bool = False


class Worker:
    def __init__(self, config: WorkerConfig, registry: HandlerRegistry) -> None:
        self.config = config
        self.registry = registry
        self.worker_id: UUID | None = None
        self.ready = asyncio.Event()
        self._pool: Any = None
        self._queue_ids: list[UUID] = []
        self._queue_id_strings: frozenset[str] = frozenset()
        self._running: dict[int, RunningJob] = {}
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._threads = ThreadPoolExecutor(
            max_workers=config.capacity, thread_name_prefix="codity-handler"
        )
        self._completer: Completer | None = None
        # One writer at a time to this worker's leased rows: the completer, the marker and the
        # heartbeat each update many of them in one statement, in no fixed row order, so two of
        # them at once on different connections could deadlock (PostgreSQL would abort one after
        # deadlock_timeout, stalling the worker for a second). Nobody else writes these rows
        # while the lease holds.
        self._write_lock = asyncio.Lock()
        self._log_each_job = bool(log.bind().is_enabled_for(logging.DEBUG))

    # ---------------------------------------------------------------- lifecycle

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set, then drain. Returns when the worker has stopped."""
        pool = await self._retry("connect", stop, self._open_pool)
        if pool is None:
            return
        self._pool = pool
        try:
            registered = await self._retry("register", stop, self._register)
            if registered is None:
                return
            await self._serve(stop)
        finally:
            self._threads.shutdown(wait=False, cancel_futures=True)
            try:
                await asyncio.wait_for(self._pool.close(), timeout=5)
            except (TimeoutError, OSError):
                self._pool.terminate()

    async def _open_pool(self) -> Any:
        return await create_pool(
            self.config.database_url,
            min_size=1,
            max_size=POOL_MAX_SIZE,
            application_name="codity-worker",
        )

    async def _register(self) -> bool:
        await self._refresh_queues()
        self.worker_id = await core.register_worker(
            self._pool,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            version=self.config.version,
            capacity=self.config.capacity,
            queue_ids=self._queue_ids,
            queue_names=list(self.config.queue_names or ["*"]),
        )
        structlog.contextvars.bind_contextvars(worker_id=str(self.worker_id))
        log.info(
            "worker registered",
            capacity=self.config.capacity,
            queues=list(self.config.queue_names or ["*"]),
            handlers=self.registry.names(),
        )
        return True

    async def _refresh_queues(self) -> None:
        names = list(self.config.queue_names) if self.config.queue_names else None
        queues = await core.resolve_worker_queues(self._pool, names)
        self._queue_ids = [q.id for q in queues]
        self._queue_id_strings = frozenset(str(q) for q in self._queue_ids)

    async def _serve(self, stop: asyncio.Event) -> None:
        self._completer = Completer(self._pool, write_lock=self._write_lock)
        notifier = Notifier(
            self.config.listen_database_url,  # DATABASE_DIRECT_URL: LISTEN needs a session
            queue_ids=lambda: self._queue_id_strings,
            wake=self._wake.set,
        )
        background = {
            asyncio.create_task(self._completer.run(), name="completer"),
            asyncio.create_task(self._heartbeat(), name="heartbeat"),
            asyncio.create_task(self._mark_running(), name="mark-running"),
            asyncio.create_task(notifier.run(self._stopping), name="notifier"),
        }
        producer = asyncio.create_task(self._produce(), name="producer")
        self.ready.set()
        stop_waiter = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait(
            {stop_waiter, producer, *background}, return_when=asyncio.FIRST_COMPLETED
        )
        crashed = [t for t in done if t is not stop_waiter]
        for task in crashed:
            log.error(
                "worker component stopped unexpectedly",
                component=task.get_name(),
                error=repr(task.exception()) if not task.cancelled() else "cancelled",
            )
        stop_waiter.cancel()
        try:
            await self._drain(producer)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
        if crashed:
            raise RuntimeError(f"worker component {crashed[0].get_name()} crashed")

    # ---------------------------------------------------------------- producer

    async def _produce(self) -> None:
        poll_s = self.config.poll_interval_ms / 1000
        backoff = Backoff()
        next_refresh = time.monotonic() + self.config.queue_refresh_ms / 1000
        while not self._stopping.is_set():
            free = self.config.capacity - len(self._running)
            filled_every_slot = False
            if free > 0 and self._queue_ids:
                self._wake.clear()  # a NOTIFY during the claim keeps it set for the next round
                try:
                    claimed = await core.claim(
                        self._pool, self._id, self._queue_ids, free, self.config.lease_ms
                    )
                except Exception as exc:
                    await self._pause_after_error("claim", exc, backoff)
                    continue
                backoff.reset()
                if claimed:
                    await self._start(claimed)
                filled_every_slot = len(claimed) == free
            if filled_every_slot:
                continue  # more work is probably waiting: claim again once slots free up
            if self.config.queue_names is None and time.monotonic() >= next_refresh:
                next_refresh = time.monotonic() + self.config.queue_refresh_ms / 1000
                try:
                    await self._refresh_queues()
                except Exception as exc:
                    await self._pause_after_error("refresh queues", exc, backoff)
                    continue
            await wait_any(self._wake, self._stopping, timeout_s=poll_s)

    async def _pause_after_error(self, what: str, exc: Exception, backoff: Backoff) -> None:
        delay = backoff.next_delay()
        if is_transient(exc):
            log.warning(
                f"database unavailable during {what}; retrying",
                retry_in_s=round(delay, 2),
                error=str(exc),
            )
        else:
            log.error(f"{what} failed", retry_in_s=round(delay, 2), exc_info=exc)
        await sleep_or_stop(delay, self._stopping)

    async def _start(self, claimed: list[core.ClaimedJob]) -> None:
        loop = asyncio.get_running_loop()
        started_at = datetime.now(UTC)
        for job in claimed:
            rj = RunningJob(
                job=job,
                ctx=self._context(job, loop),
                started_monotonic=time.monotonic(),
                started_at=started_at,
            )
            self._running[job.id] = rj
            rj.task = asyncio.create_task(self._execute(rj), name=f"job-{job.id}")

    async def _mark_running(self) -> None:
        """Mark jobs `running` once they have run MARK_RUNNING_AFTER_S, many per statement."""
        while True:
            await asyncio.sleep(MARK_RUNNING_AFTER_S)
            due_before = time.monotonic() - MARK_RUNNING_AFTER_S
            due = [
                rj
                for rj in self._running.values()
                if not rj.marked_running and rj.started_monotonic <= due_before
            ]
            if not due:
                continue
            try:
                async with self._write_lock:
                    result = await core.mark_running(
                        self._pool, [rj.job.fence for rj in due], [rj.started_at for rj in due]
                    )
            except Exception as exc:
                # Completing from 'claimed' is allowed, so the jobs run on; try again next round.
                log.warning("could not mark jobs running", error=str(exc), count=len(due))
                continue
            for rj in due:
                rj.marked_running = True
            for job_id in result.lease_lost:
                # Someone else holds the job now (our lease expired): stop our copy of it.
                log.warning("lease lost while running; cancelling handler", job_id=job_id)
                self._deliver_cancel(job_id)

    def _context(self, job: core.ClaimedJob, loop: asyncio.AbstractEventLoop) -> JobContext:
        deadline = deadline_monotonic = None
        if job.timeout_ms:
            deadline = datetime.now(UTC) + timedelta(milliseconds=job.timeout_ms)
            deadline_monotonic = time.monotonic() + job.timeout_ms / 1000
        return JobContext(
            job_id=job.id,
            queue_id=job.queue_id,
            handler=job.handler,
            payload=job.payload,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            execution_seq=job.execution_seq,
            deadline=deadline,
            logger=JobLogger(job.fence),
            cancelled=threading.Event(),
            db=self._pool,
            _fence=job.fence,
            _loop=loop,
            _deadline_monotonic=deadline_monotonic,
        )

    # ---------------------------------------------------------------- executor

    async def _execute(self, rj: RunningJob) -> None:
        try:
            outcome = await run_attempt(
                rj.ctx,
                timeout_ms=rj.job.timeout_ms,
                registry=self.registry,
                threads=self._threads,
                cancel_requested=lambda: rj.cancel_requested,
            )
        except asyncio.CancelledError:
            return  # the drain is releasing this attempt; it produces no outcome
        finally:
            self._running.pop(rj.job.id, None)
            self._wake.set()  # a slot is free
        assert self._completer is not None
        outcome = dataclasses.replace(outcome, started_at=rj.started_at)
        self._completer.submit(Finished(outcome=outcome, logger=rj.ctx.logger))
        # debug, not info: at thousands of jobs a second, rendering a line per job costs more
        # than running it. Outcomes are in job_executions; failures are logged by the completer.
        # Checked first because even a filtered-out call through the lazy logger proxy binds a
        # new logger: measurable at this rate.
        if self._log_each_job:
            log.debug(
                "job finished",
                job_id=rj.job.id,
                handler=rj.job.handler,
                attempt=rj.job.attempt,
                outcome="completed" if isinstance(outcome, core.Completion) else outcome.kind,
                duration_ms=round((time.monotonic() - rj.started_monotonic) * 1000, 1),
            )

    # ---------------------------------------------------------------- heartbeat

    async def _heartbeat(self) -> None:
        interval_s = self.config.heartbeat_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                async with self._write_lock:
                    result = await core.heartbeat(
                        self._pool, self._id, self.config.lease_ms, len(self._running)
                    )
            except Exception as exc:
                level = log.warning if is_transient(exc) else log.error
                level("heartbeat failed; will retry", error=str(exc))
                continue
            for job_id in result.cancel_requested:
                self._deliver_cancel(job_id)
            await self._flush_running_logs()

    def _deliver_cancel(self, job_id: int) -> None:
        rj = self._running.get(job_id)
        if rj is None or rj.cancel_requested:
            return
        log.info("cancel requested; cancelling handler", job_id=job_id)
        rj.cancel_requested = True
        rj.ctx.cancelled.set()
        if rj.task is not None:
            rj.task.cancel()

    async def _flush_running_logs(self) -> None:
        for rj in list(self._running.values()):
            if rj.ctx.logger.has_pending:
                try:
                    await rj.ctx.logger.flush(self._pool)
                except Exception as exc:
                    log.warning("could not write job logs yet", error=str(exc))
                    return

    # ---------------------------------------------------------------- drain

    async def _drain(self, producer: asyncio.Task[None]) -> None:
        grace_s = self.config.shutdown_grace_ms / 1000
        log.info("draining", in_flight=len(self._running), grace_ms=self.config.shutdown_grace_ms)
        self._stopping.set()
        await self._best_effort(
            "mark draining",
            lambda: core.set_worker_status(self._pool, self._id, WorkerStatus.DRAINING),
            deadline_s=2.0,
        )
        if not producer.done():
            await asyncio.gather(producer, return_exceptions=True)  # exits at its next check
        tasks = [rj.task for rj in self._running.values() if rj.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=grace_s)
        leftover = list(self._running.values())
        for rj in leftover:
            rj.ctx.cancelled.set()
            if rj.task is not None:
                rj.task.cancel()
        await asyncio.gather(*(rj.task for rj in leftover if rj.task), return_exceptions=True)
        if leftover:
            fences = [rj.job.fence for rj in leftover]
            result = await self._best_effort(
                "release", lambda: core.release(self._pool, fences), deadline_s=RELEASE_DEADLINE_S
            )
            log.info(
                "released unfinished jobs (attempts not charged)",
                job_ids=[rj.job.id for rj in leftover],
                lease_lost=list(result.lease_lost) if result else None,
            )
        if self._completer is not None and not await self._completer.wait_idle(RELEASE_DEADLINE_S):
            log.error("results could not be recorded before exit", pending=self._completer.pending)
        await self._best_effort(
            "mark stopped",
            lambda: core.set_worker_status(self._pool, self._id, WorkerStatus.STOPPED),
            deadline_s=RELEASE_DEADLINE_S,
        )
        log.info("worker stopped")

    async def _best_effort(
        self, what: str, call: Callable[[], Awaitable[T]], *, deadline_s: float
    ) -> T | None:
        """Retry a call through a database outage until `deadline_s` runs out."""
        backoff = Backoff()
        give_up_at = time.monotonic() + deadline_s
        while True:
            try:
                return await call()
            except Exception as exc:
                if not is_transient(exc) or time.monotonic() >= give_up_at:
                    log.error(f"could not {what}", error=str(exc))
                    return None
                await asyncio.sleep(
                    min(backoff.next_delay(), max(0.0, give_up_at - time.monotonic()))
                )

    async def _retry(
        self, what: str, stop: asyncio.Event, call: Callable[[], Awaitable[T]]
    ) -> T | None:
        """Retry a start-up call through a database outage until it succeeds or `stop` is set."""
        backoff = Backoff()
        while not stop.is_set():
            try:
                return await call()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                delay = backoff.next_delay()
                log.warning(
                    f"database unavailable ({what}); retrying",
                    retry_in_s=round(delay, 2),
                    error=str(exc),
                )
                await sleep_or_stop(delay, stop)
        return None

    @property
    def _id(self) -> UUID:
        assert self.worker_id is not None, "the worker registers before it claims"
        return self.worker_id

    @property
    def in_flight(self) -> int:
        return len(self._running)
