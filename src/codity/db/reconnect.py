"""Surviving a database that goes away: which errors mean "try again later", and how long to wait.

A worker or scheduler must not crash when PostgreSQL restarts; it must wait, reconnect and carry
on. The question "is this error about the connection rather than about my statement?" is the
same everywhere, so it is answered once, here.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import asyncpg

from codity.domain.errors import DatabaseUnavailableError

#: asyncpg errors that say the connection or the server is unavailable, not that a statement is wrong.
_TRANSIENT_PG_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresConnectionError,  # class 08: connection exceptions
    asyncpg.OperatorInterventionError,  # class 57: admin shutdown, crash shutdown, cannot connect now
    asyncpg.InterfaceError,  # "connection is closed", "pool is closing" and kin
)


#: asyncpg's InternalClientError for a connection lost at an odd moment of its protocol (seen
#: under the chaos suite: PostgreSQL stopped, connections cut mid-reply). Only these messages:
#: any other InternalClientError is a bug and must not be retried as if it were an outage.
_BROKEN_PROTOCOL_SIGNS = ("cannot switch to state", "unexpected connection_lost() call")


def _is_transient_one(exc: BaseException) -> bool:
    if isinstance(exc, asyncpg.InterfaceError) and "cannot perform operation" in str(exc):
        # e.g. "another operation is in progress": a programming error, not an outage
        return False
    if isinstance(exc, asyncpg.InternalClientError) and any(
        sign in str(exc) for sign in _BROKEN_PROTOCOL_SIGNS
    ):
        # the protocol state of a connection that broke in the middle of an operation
        return True
    return isinstance(exc, (*_TRANSIENT_PG_ERRORS, DatabaseUnavailableError, OSError, TimeoutError))


def is_transient(exc: BaseException) -> bool:
    """True when the error means the database is unreachable for now and retrying may succeed.

    The whole chain counts: a connection that drops mid-transaction can surface as a secondary
    error raised while rolling back (asyncpg's "cannot switch to state ..."), with the real
    cause, the lost connection, in `__context__`.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if _is_transient_one(current):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@dataclass
class Backoff:
    """Exponential backoff with full jitter, for reconnect loops. `reset()` after a success."""

    initial_s: float = 0.1
    max_s: float = 5.0
    _attempt: int = field(default=0, init=False)

    def next_delay(self) -> float:
        ceiling = min(self.max_s, self.initial_s * (2**self._attempt))
        self._attempt += 1
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self._attempt = 0

    @property
    def failures(self) -> int:
        return self._attempt


async def sleep_or_stop(delay_s: float, stop: asyncio.Event) -> bool:
    """Sleep for `delay_s` unless `stop` is set first. Returns True when stopping."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=delay_s)
    except TimeoutError:
        return False
    return True


async def wait_any(*events: asyncio.Event, timeout_s: float) -> None:
    """Return when any of `events` is set, or after `timeout_s`, whichever comes first."""
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
