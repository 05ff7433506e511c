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
