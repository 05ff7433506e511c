"""What a handler receives: the job, its attempt, a deadline, a logger, progress and cancellation."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from codity import core
from codity.worker.job_logger import JobLogger


class CancelFlag:
    """`ctx.cancelled`: set when an operator cancels the job, it times out, its lease is lost or
    the worker drains. The same calls as `threading.Event` (is_set, set, wait, clear), but the
    Event (a lock and a condition) is only built when a handler waits on it: one is made per
    job, thousands a second, and almost no handler ever waits."""

    __slots__ = ("_event", "_set")

    _make_event = threading.Lock()

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        event = self._event
        if event is not None:
            event.set()

    def clear(self) -> None:
        self._set = False
        event = self._event
        if event is not None:
            event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        """Block (a sync handler's thread) until set or `timeout` seconds have passed."""
        if self._event is None:
            with CancelFlag._make_event:
                if self._event is None:
                    event = threading.Event()
                    if self._set:
                        event.set()
                    self._event = event
        if self._set:
            self._event.set()
        return self._event.wait(timeout)


@dataclass
class JobContext:
    """Passed to every handler. `job_id` + `attempt` let a handler deduplicate side effects
    downstream (delivery is at-least-once)."""

    job_id: int
    queue_id: UUID
    handler: str
    payload: Any
    attempt: int
    max_attempts: int
    execution_seq: int
    #: Wall-clock time by which the handler must finish (None: no timeout).
    deadline: datetime | None
    logger: JobLogger
    #: Set when an operator cancels the job or the worker times it out or drains. Async handlers
    #: are also cancelled outright; a sync handler (in a thread) should poll `is_set()`.
    cancelled: CancelFlag | threading.Event
    #: The worker's database pool, for handlers that read the database (report.generate).
    db: Any
    #: W3C traceparent of the code that enqueued the job, when it was traced.
    trace_parent: str | None = None
    _fence: core.Fence = field(repr=False, default=None)  # type: ignore[assignment]
    _loop: asyncio.AbstractEventLoop | None = field(repr=False, default=None)
    _deadline_monotonic: float | None = field(repr=False, default=None)

    @property
    def fence(self) -> core.Fence:
        return self._fence

    def time_left(self) -> float | None:
        """Seconds until the deadline, or None when the job has no timeout."""
        if self._deadline_monotonic is None:
            return None
        return max(0.0, self._deadline_monotonic - time.monotonic())

    async def progress(self, pct: int, message: str | None = None) -> bool:
        """Report progress (0..100) on the job row. Returns False when the lease was lost."""
        pct = max(0, min(100, int(pct)))
        ok: bool = await core.report_progress(self.db, self._fence, pct, message)
        return ok

    def progress_sync(self, pct: int, message: str | None = None) -> bool:
        """`progress` for sync handlers running in the thread pool."""
        if self._loop is None:
            raise RuntimeError("progress_sync is only available inside a running worker")
        future = asyncio.run_coroutine_threadsafe(self.progress(pct, message), self._loop)
        return future.result()
