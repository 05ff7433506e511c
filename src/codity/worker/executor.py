"""One attempt of one job: find the handler, run it under the job's timeout, judge the result.

Whatever the handler does (raise, hang, return something that is not JSON) becomes a
`Failure` of this attempt only; nothing a handler does can crash the worker. The outcome is
handed to the completer, which records it in batches.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from codity import core
from codity.worker.context import JobContext
from codity.worker.registry import HandlerRegistry, RegisteredHandler

Outcome = core.Completion | core.Failure

#: Stored errors and tracebacks are bounded: they are for people, not archives.
MAX_ERROR_CHARS = 2000
MAX_TRACEBACK_CHARS = 8000


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_exception(exc: BaseException) -> str:
    message = str(exc)
    return _clip(
        f"{type(exc).__name__}: {message}" if message else type(exc).__name__, MAX_ERROR_CHARS
    )


async def _call(registered: RegisteredHandler, ctx: JobContext, threads: ThreadPoolExecutor) -> Any:
    if registered.is_async:
        return await registered.fn(ctx)
    loop = asyncio.get_running_loop()
    result = await loop.run_in_executor(threads, registered.fn, ctx)
    if inspect.isawaitable(result):  # a plain function that returned a coroutine
        result = await result
    return result


async def run_attempt(
    ctx: JobContext,
    *,
    timeout_ms: int | None,
    registry: HandlerRegistry,
    threads: ThreadPoolExecutor,
    cancel_requested: Callable[[], bool],
) -> Outcome:
    """Run the handler for `ctx`'s job. Re-raises `CancelledError` unless a cancel was requested
    (the drain cancels attempts it is about to release; those produce no outcome)."""
    fence = ctx.fence
    registered = registry.get(ctx.handler)
    if registered is None:
        known = ", ".join(registry.names()) or "none"
        return core.Failure(
            fence=fence,
            error=f"unknown handler {ctx.handler!r}: no handler of that name is registered on "
            f"this worker (registered: {known})",
            kind="unknown_handler",
        )
    scope = asyncio.timeout(timeout_ms / 1000 if timeout_ms else None)
    try:
        async with scope:
            result = await _call(registered, ctx, threads)
    except TimeoutError as exc:
        if scope.expired():
            ctx.cancelled.set()  # a sync handler still running in its thread may watch this
            return core.Failure(
                fence=fence, error=f"timed out after {timeout_ms} ms", kind="timeout"
            )
        return _failure(fence, exc)
    except asyncio.CancelledError:
        ctx.cancelled.set()
        if not cancel_requested():
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return core.Failure(fence=fence, error="cancelled on request", kind="cancelled")
    except Exception as exc:
        return _failure(fence, exc)
    try:
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return core.Failure(
            fence=fence,
            error=_clip(
                f"handler returned a result that is not JSON-serialisable "
                f"({type(result).__name__}): {exc}",
                MAX_ERROR_CHARS,
            ),
        )
    return core.Completion(fence=fence, result=result)


def _failure(fence: core.Fence, exc: BaseException) -> core.Failure:
    tb = "".join(traceback.format_exception(exc))
    return core.Failure(
        fence=fence,
        error=describe_exception(exc),
        traceback=_clip(tb, MAX_TRACEBACK_CHARS),
    )
