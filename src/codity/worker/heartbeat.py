"""The heartbeat: every WORKER_HEARTBEAT_MS one statement keeps the leases of the jobs in hand.

It sends the fences the worker really holds (running handlers and outcomes not yet recorded)
and gets back:
- held jobs whose lease is gone (reaped during an outage, claimed by someone else): their
  handlers are cancelled (async) or their outcomes discarded (sync), never recorded;
- jobs leased under this worker's id that it does not hold (a claim whose reply was lost):
  already given back to the queue by the same statement;
- jobs an operator asked to cancel: their handlers are cancelled.
It runs under the claim lock (never beside a claim in flight) and the write lock (one writer at
a time to this worker's leased rows). It also flushes handler log lines of long-running jobs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from uuid import UUID

import structlog

from codity import core
from codity.core.loop_service import LoopService
from codity.worker.connection import HeldConnection
from codity.worker.executor import Executor
from codity.worker.running import Running

log = structlog.get_logger("codity.worker")


class Heartbeat(LoopService):
    name = "heartbeat"

    def __init__(
        self,
        conn: HeldConnection,
        *,
        worker_id: UUID,
        interval_ms: int,
        lease_ms: int,
        held: Callable[[], list[core.Fence]],
        running: Running,
        lingering: Callable[[], int],
        executor: Executor,
        claim_lock: asyncio.Lock,
        write_lock: asyncio.Lock,
    ) -> None:
        super().__init__(conn, interval_ms=interval_ms)
        self.held_conn = conn
        self._worker_id = worker_id
        self._lease_ms = lease_ms
        self._held = held
        self._running = running
        self._lingering = lingering
        self._executor = executor
        self._claim_lock = claim_lock
        self._write_lock = write_lock
        self.given_back = 0
        self._beaten = False

    def on_error(self, exc: Exception) -> None:
        self.held_conn.discard()  # it may be broken mid-operation: the next round reconnects

    async def run_once(self) -> bool:
        if self.iterations == 0 and not self._beaten:
            # Not at start: registering just set the heartbeat, nothing is leased yet, and a
            # beat now would hold the claim lock while the first claim waits for it.
            self._beaten = True
            return False
        conn = await self.held_conn.get()
        async with self._claim_lock, self._write_lock:
            sent_at = time.monotonic()  # the extended leases run from later (the server's now)
            result = await core.heartbeat(
                conn,
                self._worker_id,
                self._lease_ms,
                self._held(),
                len(self._running),
                lingering_threads=self._lingering(),
            )
            # Every attempt running now was held when the beat was sent (no claim runs beside
            # it): those not reported lost have a lease that holds until sent_at + lease.
            lost = {(f.job_id, f.execution_seq) for f in result.lost_fences}
            for attempt, rj in self._running.jobs.items():
                if attempt not in lost:
                    rj.lease_deadline = max(rj.lease_deadline, sent_at + self._lease_ms / 1000)
            await self._flush_running_logs(conn)  # the writer's connection is shared
        for fence in result.lost_fences:
            self._executor.lose(fence)  # a finished one is dropped by the completer instead
        if result.released:
            self.given_back += len(result.released)
            log.warning(
                "gave back jobs leased to this worker that it did not hold "
                "(a claim whose reply was lost); attempts refunded",
                job_ids=result.released,
            )
        for fence in result.cancel_fences:
            self._executor.cancel(fence)
        return False

    async def _flush_running_logs(self, conn: object) -> None:
        for rj in list(self._running.jobs.values()):
            if rj.ctx.logger.has_pending:
                try:
                    await rj.ctx.logger.flush(conn)
                except Exception as exc:
                    log.warning("could not write job logs yet", error=str(exc))
                    return
