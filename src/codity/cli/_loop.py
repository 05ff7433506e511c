"""The event loop the long-running commands run on: uvloop when it is installed.

uvloop (a libuv event loop, already installed with `uvicorn[standard]`) makes task scheduling and
socket I/O cheaper, which a worker running thousands of jobs a second feels. pgqueuer's own CLI
makes the same choice, so `codity bench` runs both sides on it. Without uvloop (say, on
Windows), the standard asyncio loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop ships with uvicorn[standard]
        return asyncio.run(coro)
    result: T = uvloop.run(coro)
    return result
