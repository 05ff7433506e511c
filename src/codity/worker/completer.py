"""The completer: finished attempts are buffered and recorded in batches.

One `core.complete` and one `core.fail` statement flush many outcomes at once, so the database
sees a few round trips per batch instead of one per job. When the database is away the
outcomes stay in the buffer and are flushed after it returns; an outcome whose lease was lost
meanwhile (the reaper gave the job to someone else) is logged and dropped, as fencing demands.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import structlog

from codity import core
from codity.db.reconnect import Backoff, is_transient
from codity.worker.executor import Outcome
from codity.worker.job_logger import JobLogger

log = structlog.get_logger("codity.worker.completer")

#: The most outcomes one flush sends.
MAX_BATCH = 500
#: An error that is not an outage is retried this many times before the batch is given up.
MAX_NON_TRANSIENT_FAILURES = 3


@dataclass(frozen=True)
class Finished:
    outcome: Outcome
    logger: JobLogger | None = None


class Completer:
    def __init__(
        self, conn: Any, *, max_batch: int = MAX_BATCH, write_lock: asyncio.Lock | None = None
    ) -> None:
        self._conn = conn
        #: Shared with the worker's other writers to its leased rows (see Worker._write_lock).
        self._write_lock = write_lock or asyncio.Lock()
        self._max_batch = max_batch
        self._buffer: list[Finished] = []
        self._nonempty = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.recorded = 0
        self.lease_lost = 0

    def submit(self, finished: Finished) -> None:
        self._buffer.append(finished)
        self._nonempty.set()
        self._idle.clear()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until everything submitted has been recorded. False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def run(self) -> None:
        """Flush forever (until cancelled)."""
        backoff = Backoff()
        failures = 0
        while True:
            await self._nonempty.wait()
            batch = self._buffer[: self._max_batch]
            try:
                await self._flush_once(batch)
            except Exception as exc:
                if not is_transient(exc):
                    failures += 1
                    if failures >= MAX_NON_TRANSIENT_FAILURES:
                        # Not an outage: retrying the same batch would fail forever. Drop it;
                        # the leases expire and the reaper hands the jobs out again.
                        log.exception("could not record results; dropped", count=len(batch))
                        self._remove(batch)
                        self._settle()
                        failures = 0
                        continue
                delay = backoff.next_delay()
                log.warning(
                    "database unavailable; results kept for retry"
                    if is_transient(exc)
                    else "could not record results; retrying",
                    pending=len(self._buffer),
                    retry_in_s=round(delay, 2),
                    error=repr(exc),
                )
                await asyncio.sleep(delay)
                continue
            backoff.reset()
            failures = 0
            self._settle()

    def _settle(self) -> None:
        if not self._buffer:
            self._nonempty.clear()
            self._idle.set()

    async def _flush_once(self, batch: list[Finished]) -> None:
        for item in batch:
            if item.logger is not None and item.logger.has_pending:
                await item.logger.flush(self._conn, final=True)
        completions = [f for f in batch if isinstance(f.outcome, core.Completion)]
        failures = [f for f in batch if isinstance(f.outcome, core.Failure)]
        # Completions first, then failures; each group leaves the buffer once it is recorded, so
        # a retry after an outage never sends an already-recorded outcome a second time.
        if completions:
            async with self._write_lock:
                result = await self._record_completions([f.outcome for f in completions])  # type: ignore[misc]
            self._account(result, "completed")
            self._remove(completions)
        if failures:
            async with self._write_lock:
                result = await core.fail(self._conn, [f.outcome for f in failures])  # type: ignore[misc]
            self._account(result, "failed")
            self._remove(failures)

    async def _record_completions(self, completions: list[core.Completion]) -> core.BatchResult:
        return await core.complete(self._conn, completions)

    def _remove(self, done: list[Finished]) -> None:
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
