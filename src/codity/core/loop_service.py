"""LoopService and `retry`: the one shape of every background loop, and the one retry helper.

Every loop of the worker (producer, completer, heartbeat, marker, notifier) and of the scheduler
(promoter, cron, reaper, dead-worker sweep, pruner) is a `LoopService` that implements
`run_once()` only. The base owns timing (a tick, or an event that wakes it early; run again at
once while a batch came back full), survival (a database outage is waited out with backoff and
the loop carries on; any other error is logged and the loop carries on at its next tick) and
shutdown (stop between iterations, never in the middle of one).

`retry()` is the same survival for a single call: start-up steps (connect, register) retried
until they succeed or the process is asked to stop, and drain steps (release, mark stopped)
retried until a deadline. Both decide "outage or bug?" with `codity.db.reconnect.is_transient`.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from codity.db.reconnect import Backoff, is_transient, sleep_or_stop, wait_any

log = structlog.get_logger("codity.loop")
T = TypeVar("T")


class LoopService(ABC):
    #: Shown in logs.
    name: str = "loop"

    def __init__(self, conn: Any, *, interval_ms: int, wake: asyncio.Event | None = None) -> None:
        if interval_ms <= 0:
            raise ValueError(f"{type(self).__name__}: interval_ms must be positive")
        self.conn = conn
        self.interval_s = interval_ms / 1000
        #: Set by others to run the next iteration before the interval is up.
        self.wake = wake
        self.iterations = 0
        self.errors = 0
        #: The event `run` was given: a long `run_once` (the notifier's listen) watches it.
        self.stopping = asyncio.Event()

    @abstractmethod
    async def run_once(self) -> bool:
        """Do one round of work. Return True when there is probably more to do right away
        (a batch came back full), so the loop runs again without waiting for the next tick."""

    def on_error(self, exc: Exception) -> None:  # noqa: B027 - an optional hook, not abstract
        """Called after a failed iteration, before the pause (the completer counts them)."""

    async def run(self, stop: asyncio.Event) -> None:
        self.stopping = stop
        backoff = Backoff()
        while not stop.is_set():
            if self.wake is not None:
                # Cleared before the work, so a wake-up that arrives during it is kept.
                self.wake.clear()
            try:
                more = await self.run_once()
            except Exception as exc:
                self.errors += 1
                self.on_error(exc)
                if await pause_after_error(self.name, exc, backoff, stop, floor_s=self.interval_s):
                    return
                continue
            self.iterations += 1
            if backoff.failures:
                log.info("database reachable again", loop=self.name)
            backoff.reset()
            if more:
                await asyncio.sleep(0)  # let the others run, then continue the backlog
                continue
            if self.wake is None:
                if await sleep_or_stop(self.interval_s, stop):
                    return
            else:
                await wait_any(self.wake, stop, timeout_s=self.interval_s)


async def pause_after_error(
    what: str, exc: Exception, backoff: Backoff, stop: asyncio.Event, *, floor_s: float = 0.0
) -> bool:
    """Log `exc` and wait before the next try: backoff for an outage, at least `floor_s` for
    anything else (a bug retried in a tight loop would flood the log). True when stopping."""
    delay = backoff.next_delay()
    if is_transient(exc):
        log.warning(
            "database unavailable; retrying", loop=what, retry_in_s=round(delay, 2), error=str(exc)
        )
    else:
        delay = max(delay, floor_s)
        log.error("iteration failed", loop=what, retry_in_s=round(delay, 2), exc_info=exc)
    return await sleep_or_stop(delay, stop)


async def retry(
    what: str,
    call: Callable[[], Awaitable[T]],
    *,
    stop: asyncio.Event | None = None,
    deadline_s: float | None = None,
) -> T | None:
    """Call `call` until it succeeds, retrying through a database outage with backoff.

    Gives up (returns None) when `stop` is set or `deadline_s` has passed; an error that is not
    an outage is raised at once when there is no deadline (a start-up bug must not be retried
    forever) and logged and given up on when there is one (a best-effort drain step).
    """
    backoff = Backoff()
    give_up_at = None if deadline_s is None else time.monotonic() + deadline_s
    while stop is None or not stop.is_set():
        try:
            return await call()
        except Exception as exc:
            out_of_time = give_up_at is not None and time.monotonic() >= give_up_at
            if not is_transient(exc) or out_of_time:
                if give_up_at is None:
                    raise
                log.error(f"could not {what}", error=str(exc))
                return None
            delay = backoff.next_delay()
            if give_up_at is not None:
                delay = min(delay, max(0.0, give_up_at - time.monotonic()))
            log.warning(
                f"database unavailable ({what}); retrying",
                retry_in_s=round(delay, 2),
                error=str(exc),
            )
            if stop is not None:
                if await sleep_or_stop(delay, stop):
                    return None
            else:
                await asyncio.sleep(delay)
    return None
