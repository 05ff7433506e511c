"""Polling a condition until it holds: the one wait loop the tests share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def wait_for(
    check: Callable[[], Awaitable[Any]],
    *,
    timeout_s: float = 20.0,
    interval_s: float = 0.05,
    what: str = "",
) -> Any:
    """Await `check()` every `interval_s` until it returns something truthy, and return that;
    fail the test after `timeout_s` naming what was awaited and the last value seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout_s} s waiting for {what or check} (last value {value!r})"
            )
        await asyncio.sleep(interval_s)


async def wait_until_blocked(
    observer: Any, waiter_pid: int, holder_pid: int, *, timeout_s: float = 20.0
) -> None:
    """Wait until backend `waiter_pid` is waiting for a lock that backend `holder_pid` holds,
    as PostgreSQL itself reports it (`pg_blocking_pids`), asked on a third connection.

    This is what a race test means by "the second transaction is blocked on the first": a
    `sleep()` followed by `assert not task.done()` cannot tell that from "has not started yet"
    on a loaded machine, and passes in both cases."""

    async def blocked() -> bool:
        return bool(
            await observer.fetchval(
                "SELECT $2::int = ANY(pg_blocking_pids($1::int))", waiter_pid, holder_pid
            )
        )

    await wait_for(
        blocked,
        timeout_s=timeout_s,
        interval_s=0.02,
        what=f"backend {waiter_pid} to wait on a lock held by backend {holder_pid}",
    )
