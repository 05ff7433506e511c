"""LoopService: the base of every scheduler loop. Subclasses implement `run_once()` only.

The base owns timing (a tick, run again at once while a batch came back full), survival (a
database outage is waited out with backoff and the loop carries on; any other error is logged
and the loop carries on at its next tick) and shutdown (stop between iterations, never in the
middle of one: each `run_once` is one short transaction or a few).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any

import structlog

from codity.db.reconnect import Backoff, is_transient, sleep_or_stop

log = structlog.get_logger("codity.scheduler")


class LoopService(ABC):
    #: Shown in logs.
    name: str = "loop"

    def __init__(self, conn: Any, *, interval_ms: int) -> None:
        if interval_ms <= 0:
            raise ValueError(f"{type(self).__name__}: interval_ms must be positive")
        self.conn = conn
        self.interval_s = interval_ms / 1000
        self.iterations = 0
        self.errors = 0

    @abstractmethod
    async def run_once(self) -> bool:
        """Do one round of work. Return True when there is probably more to do right away
        (a batch came back full), so the loop runs again without waiting for the next tick."""

    async def run(self, stop: asyncio.Event) -> None:
        backoff = Backoff()
        while not stop.is_set():
            try:
                more = await self.run_once()
            except Exception as exc:
                self.errors += 1
                delay = backoff.next_delay()
                if is_transient(exc):
                    log.warning(
                        "database unavailable; retrying",
                        loop=self.name,
                        retry_in_s=round(delay, 2),
                        error=str(exc),
                    )
                else:
                    log.error("loop iteration failed", loop=self.name, exc_info=exc)
                    delay = max(delay, self.interval_s)
                if await sleep_or_stop(delay, stop):
                    return
                continue
            self.iterations += 1
            if backoff.failures:
                log.info("database reachable again", loop=self.name)
            backoff.reset()
            if more:
                await asyncio.sleep(0)  # let the others run, then continue the backlog
                continue
            if await sleep_or_stop(self.interval_s, stop):
                return
