"""The worker process: named components, each in its own module, wired together here.

    notifier --wake--> producer --claim(limit = free slots, all queues, one statement)--> executor
    executor --outcome--> completer --complete (one statement) / fail, in batches--> PostgreSQL
    heartbeat: every WORKER_HEARTBEAT_MS one statement keeps the leases of the jobs in hand,
               gives back jobs leased to this worker that it does not hold, and reports lost
               leases (handler cancelled, outcome never recorded) and cancel requests.
    marker:    jobs still running after 0.1 s are shown `running`.
    lease guard: an attempt whose lease could not be renewed in time (the database away longer
               than the lease) is stopped before the reaper can hand the job to someone else.
    drain:     on stop, finish within the grace period, release the rest (refunded).

Every loop is a `codity.core.loop_service.LoopService`; every state change goes through
`codity.core`; this module only decides which component runs when.
"""

from __future__ import annotations

import asyncio
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import UUID

import structlog

from codity import core, tracing
from codity.core.loop_service import LoopService, retry
from codity.db.pool import create_pool
from codity.worker.completer import Completer
from codity.worker.config import WorkerConfig
from codity.worker.connection import HeldConnection
from codity.worker.drain import drain
from codity.worker.executor import Executor
from codity.worker.heartbeat import Heartbeat
from codity.worker.lease_guard import LeaseGuard
from codity.worker.marker import Marker
from codity.worker.notifier import Notifier
from codity.worker.producer import Producer
from codity.worker.registry import HandlerRegistry
from codity.worker.running import Running

log = structlog.get_logger("codity.worker")

#: Pool size: registration, the drain, and handlers that read the database (the producer and
#: the writer hold connections of their own, see worker.connection).
POOL_MAX_SIZE = 4
#: The shortest time a worker statement may wait for its reply before it is given up.
COMMAND_TIMEOUT_FLOOR_S = 10.0


class Worker:
    def __init__(self, config: WorkerConfig, registry: HandlerRegistry) -> None:
        self.config = config
        self.registry = registry
        self.worker_id: UUID | None = None
        self.ready = asyncio.Event()
        self._pool: Any = None
        self._queue_ids: list[UUID] = []
        self._fair = False  # share claims between projects: the queues span several of them
        self._flow = False  # claims go through claim_jobs_flow (fair shares or flow control)
        self._queue_id_strings: frozenset[str] = frozenset()
        self._running = Running()
        self._threads = ThreadPoolExecutor(
            max_workers=config.capacity, thread_name_prefix="codity-handler"
        )
        # One writer at a time to this worker's leased rows: the completer, the marker and the
        # heartbeat each update many of them in one statement, in no fixed row order, so two of
        # them at once could deadlock (PostgreSQL would abort one after deadlock_timeout,
        # stalling the worker for a second). They share one connection for the same reason.
        self._write_lock = asyncio.Lock()
        # A claim and a heartbeat never overlap (see worker.producer).
        self._claim_lock = asyncio.Lock()
        self._completer: Completer | None = None
        self._executor: Executor | None = None
        self._components: list[LoopService] = []
        # The connections the producer and the writer (completer, marker, heartbeat) hold. A
        # statement that hangs longer than timeout_s is given up (see worker.connection):
        # never shorter than a lease, so a busy server is not mistaken for a silent one.
        timeout_s = max(COMMAND_TIMEOUT_FLOOR_S, config.lease_ms / 1000)
        # Both keep their statements' plans (generic_plans: planned once per connection instead
        # of on every claim and every flush; the statements are written for it, claim.sql).
        self._writer = HeldConnection(
            config.database_url,
            application_name="codity-worker",
            command_timeout_s=timeout_s,
            generic_plans=True,
        )
        self._producer_conn = HeldConnection(
            config.database_url,
            application_name="codity-worker",
            command_timeout_s=timeout_s,
            generic_plans=True,
        )

    # ---------------------------------------------------------------- lifecycle

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set, then drain. Returns when the worker has stopped."""
        pool = await retry("connect", self._open_pool, stop=stop)
        if pool is None:
            return
        self._pool = pool
        # The producer's and the writer's connections open while the worker registers (each is
        # a connect plus codec set-up: tens of milliseconds before the first claim otherwise);
        # one that fails here is simply opened again on first use.
        warm = asyncio.gather(self._producer_conn.get(), self._writer.get(), return_exceptions=True)
        try:
            registered = await retry("register", self._register, stop=stop)
            await warm
            if registered is None:
                return
            await self._serve(stop)
        finally:
            for held in (self._writer, self._producer_conn):
                await held.release()  # (also released by _serve; releasing twice is a no-op)
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
            handlers=self.registry.names(),
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
        self._fair = self.config.fair_shares and len({q.project_id for q in queues}) > 1
        self._flow = self._fair or any(q.flow_control for q in queues)
        self._queue_id_strings = frozenset(str(q) for q in self._queue_ids)

    def _held(self) -> list[core.Fence]:
        """Every job in hand: running, or finished with its outcome not yet recorded."""
        completer = self._completer
        return self._running.fences() + (completer.fences() if completer else [])

    async def _serve(self, stop: asyncio.Event) -> None:
        assert self.worker_id is not None, "the worker registers before it serves"
        cfg = self.config
        writer, producer_conn = self._writer, self._producer_conn
        self._completer = completer = Completer(writer, write_lock=self._write_lock)
        claim_wake = asyncio.Event()  # wakes the producer: a NOTIFY, a freed slot
        self._executor = executor = Executor(
            registry=self.registry,
            threads=self._threads,
            running=self._running,
            completer=completer,
            # the producer below: a freed slot wakes it only while a claim could use it
            slot_freed=lambda: producer.slot_freed(),
            db=self._pool,
            tracer=tracing.worker_tracer(),
        )
        producer = Producer(
            producer_conn,
            flow_first=self._flow,
            worker_id=self.worker_id,
            capacity=cfg.capacity,
            lease_ms=cfg.lease_ms,
            poll_interval_ms=cfg.poll_interval_ms,
            # lingering sync threads hold slots too: never more threads than capacity
            busy=lambda: len(self._running) + len(executor.lingering),
            queue_ids=lambda: self._queue_ids,
            fair=lambda: self._fair,
            running_by_queue=self._running.by_queue,
            refresh_queues=self._refresh_queues if cfg.queue_names is None else None,
            queue_refresh_ms=cfg.queue_refresh_ms,
            executor=executor,
            claim_lock=self._claim_lock,
            wake=claim_wake,
        )
        background: list[LoopService] = [
            completer,
            Heartbeat(
                writer,
                worker_id=self.worker_id,
                interval_ms=cfg.heartbeat_ms,
                lease_ms=cfg.lease_ms,
                held=self._held,
                running=self._running,
                lingering=lambda: len(executor.lingering),
                executor=executor,
                claim_lock=self._claim_lock,
                write_lock=self._write_lock,
            ),
            Marker(writer, running=self._running, executor=executor, write_lock=self._write_lock),
            LeaseGuard(running=self._running, executor=executor, lease_ms=cfg.lease_ms),
            Notifier(
                cfg.listen_database_url,  # DATABASE_DIRECT_URL: LISTEN needs a session
                queue_ids=lambda: self._queue_id_strings,
                wake=claim_wake.set,
                # a worker serving every queue looks for a queue it does not know yet
                on_unknown=producer.queue_unknown if cfg.queue_names is None else None,
            ),
        ]
        self._components = [producer, *background]
        # The producer stops claiming when the drain begins; the others (completer, heartbeat,
        # marker, notifier) keep going through the grace period and stop after the drain.
        stop_claiming = asyncio.Event()
        stop_background = asyncio.Event()
        bg_tasks = {asyncio.create_task(c.run(stop_background), name=c.name) for c in background}
        producer_task = asyncio.create_task(producer.run(stop_claiming), name=producer.name)
        self.ready.set()
        stop_waiter = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait(
            {stop_waiter, producer_task, *bg_tasks}, return_when=asyncio.FIRST_COMPLETED
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
            stop_claiming.set()
            await drain(
                pool=self._pool,
                worker_id=self.worker_id,
                running=self._running,
                completer=completer,
                producer=producer_task,
                grace_ms=cfg.shutdown_grace_ms,
            )
        finally:
            stop_background.set()
            for task in bg_tasks:
                task.cancel()
            await asyncio.gather(*bg_tasks, return_exceptions=True)
            await writer.release()
            await producer_conn.release()
        if crashed:
            raise RuntimeError(f"worker component {crashed[0].get_name()} crashed")

    @property
    def in_flight(self) -> int:
        return len(self._running)

    @property
    def lingering_threads(self) -> int:
        """Sync handlers whose attempt ended but whose thread still runs (see Executor)."""
        return len(self._executor.lingering) if self._executor is not None else 0
