"""A handler for the API end-to-end test, loaded into a real `codity worker` with `--app`."""

from __future__ import annotations

from typing import Any

from codity.worker import JobContext, handler


@handler("e2e.greet")
async def greet(ctx: JobContext) -> dict[str, Any]:
    """Logs a line on every attempt; fails the first one so the job has a retry history."""
    name = (ctx.payload or {}).get("name", "world")
    ctx.logger.info("greeting", attempt=ctx.attempt, who_len=len(name))
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails on purpose")
    await ctx.progress(100, "greeted")
    return {"greeting": f"hello {name}"}
