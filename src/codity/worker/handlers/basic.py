"""Small built-in handlers for demos, tests and benchmarks: `noop`, `sleep`, `fail`."""

from __future__ import annotations

import asyncio
from typing import Any

from codity.worker.context import JobContext
from codity.worker.registry import handler

#: `sleep` refuses longer naps: a demo handler must not hold a slot for hours by mistake.
MAX_SLEEP_S = 3600.0


class HandlerInputError(ValueError):
    """The payload does not fit the handler; the attempt fails with this message."""


def _mapping(payload: Any) -> dict[str, Any]:
    if payload is None:
        return {}
    if not isinstance(payload, dict):
        raise HandlerInputError(f"payload must be a JSON object, not {type(payload).__name__}")
    return payload


@handler("noop")
async def noop(ctx: JobContext) -> None:
    """Does nothing, successfully: measures the queue itself."""
    return


@handler("sleep")
async def sleep(ctx: JobContext) -> dict[str, Any]:
    """Sleeps `{"seconds": n}` (default 1), then succeeds."""
    seconds = _mapping(ctx.payload).get("seconds", 1)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise HandlerInputError('"seconds" must be a non-negative number')
    if seconds > MAX_SLEEP_S:
        raise HandlerInputError(f'"seconds" must be at most {MAX_SLEEP_S:g}')
    await asyncio.sleep(float(seconds))
    return {"slept_s": seconds}


@handler("fail")
async def fail(ctx: JobContext) -> dict[str, Any]:
    """Fails while `attempt < until_attempt`, then succeeds; without `until_attempt`, always fails."""
    until = _mapping(ctx.payload).get("until_attempt")
    if until is not None and (isinstance(until, bool) or not isinstance(until, int)):
        raise HandlerInputError('"until_attempt" must be an integer')
    if until is None or ctx.attempt < until:
        raise RuntimeError(f"failing on purpose (attempt {ctx.attempt}, until_attempt {until})")
    return {"succeeded_on_attempt": ctx.attempt}
