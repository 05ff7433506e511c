"""The completer: finished attempts are buffered and recorded in batches.

One `core.complete` statement (one round trip: jobs, execution rows and dependants together)
and, when some attempts failed, one `core.fail` flush many outcomes at once. When the database
is away the outcomes stay in the buffer and are flushed after it returns; an outcome whose lease
was lost meanwhile (the reaper gave the job to someone else) is logged and dropped, as fencing
demands. An outcome waiting here is still in the worker's hands: the heartbeat keeps its lease.

Flushes are at least MIN_FLUSH_INTERVAL_S apart: an outcome that arrives sooner after the last
flush waits for the rest of that interval, and the outcomes that arrive meanwhile go with it. At
a trickle (jobs further apart than the interval) nothing waits; when jobs end one at a time
faster than that, a statement per job was most of the server's time per job. The figures, and
why not longer (a concurrency_limit 1 queue frees its slot only when a completion is recorded):
docs/DESIGN_DECISIONS.md ADR-20.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import structlog

from codity import core
from codity.core.loop_service import LoopService
from codity.db.reconnect import is_transient
from codity.worker.connection import HeldConnection
from codity.worker.job_logger import JobLogger

log = structlog.get_logger("codity.worker.completer")

#: The most outcomes one flush sends.
MAX_BATCH = 500
#: An error that is not an outage is retried this many times before the batch is given up.
MAX_NON_TRANSIENT_FAILURES = 3
#: Nothing to flush: look again this often anyway (submit() wakes it at once).
IDLE_CHECK_MS = 1000
#: Flushes are at least this far apart (see the module's docstring).
MIN_FLUSH_INTERVAL_S = 0.002

Outcome = core.Completion | core.Failure


@dataclass(frozen=True, slots=True)
class Finished:
    outcome: Outcome
    logger: JobLogger | None = None


class Completer(LoopService):
    name = "completer"

    def __init__(
        self,
        conn: HeldConnection,
        *,
        write_lock: asyncio.Lock,
        max_batch: int = MAX_BATCH,
        min_flush_interval_s: float = MIN_FLUSH_INTERVAL_S,
    ) -> None:
        super().__init__(conn, interval_ms=IDLE_CHECK_MS, wake=asyncio.Event())
        self.held = conn
        #: Shared with the worker's other writers to its leased rows (see Worker._write_lock).
        self._write_lock = write_lock
        self._max_batch = max_batch
        self._min_interval_s = min_flush_interval_s
        self._last_flush = -float("inf")
        self._buffer: list[Finished] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._failures = 0
        self.recorded = 0
        self.lease_lost = 0

    def submit(self, finished: Finished) -> None:
        self._buffer.append(finished)
        self._idle.clear()
        assert self.wake is not None
        self.wake.set()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def fences(self) -> list[core.Fence]:
        """Outcomes not yet recorded: their jobs are still in hand."""
        return [f.outcome.fence for f in self._buffer]

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until everything submitted has been recorded. False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def run_once(self) -> bool:
        if not self._buffer:
            self._idle.set()
            return False
        wait_s = self._last_flush + self._min_interval_s - time.monotonic()
        if wait_s > 0 and len(self._buffer) < self._max_batch:
            await asyncio.sleep(wait_s)  # the outcomes that arrive meanwhile go with these
        self._last_flush = time.monotonic()
        await self._flush_once(self._buffer[: self._max_batch])
        self._failures = 0
        if not self._buffer:
            self._idle.set()
        return bool(self._buffer)

    def on_error(self, exc: Exception) -> None:
        self.held.discard()
        if is_transient(exc):
            return  # an outage: the outcomes stay buffered and are flushed after it
        self._failures += 1
        if self._failures >= MAX_NON_TRANSIENT_FAILURES:
            # Not an outage: retrying the same batch would fail forever. Drop it; the leases
            # expire and the reaper hands the jobs out again.
            batch = self._buffer[: self._max_batch]
            log.error("could not record results; dropped", count=len(batch), error=repr(exc))
            self._remove(batch)
            self._failures = 0
            if not self._buffer:
                self._idle.set()

    async def _flush_once(self, batch: list[Finished]) -> None:
        conn = await self.held.get()
        if any(item.logger is not None and item.logger.has_pending for item in batch):
            async with self._write_lock:  # the writer's connection is shared
                for item in batch:
                    if item.logger is not None and item.logger.has_pending:
                        await item.logger.flush(conn, final=True)
        completions = [f for f in batch if isinstance(f.outcome, core.Completion)]
        failures = [f for f in batch if isinstance(f.outcome, core.Failure)]
        # Completions first, then failures; each group leaves the buffer once it is recorded, so
        # a retry after an outage never sends an already-recorded outcome a second time.
        if completions:
            async with self._write_lock:
                result = await core.complete(conn, [f.outcome for f in completions])  # type: ignore[misc]
            self._account(result, "completed")
            self._remove(completions)
        if failures:
            async with self._write_lock:
                result = await core.fail(conn, [f.outcome for f in failures])  # type: ignore[misc]
            self._account(result, "failed")
            self._remove(failures)

    def _remove(self, done: list[Finished]) -> None:
        if len(done) == len(self._buffer):
            self._buffer = []
            return
        ids = {id(f) for f in done}
        self._buffer = [f for f in self._buffer if id(f) not in ids]

    def _account(self, result: core.BatchResult, what: str) -> None:
        self.recorded += len(result.applied)
        if result.lease_lost:
            self.lease_lost += len(result.lease_lost)
            log.warning(
                "lease lost before the result was recorded; result dropped",
                outcome=what,
                job_ids=result.lease_lost,
            )
