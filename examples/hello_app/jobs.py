"""Handlers for `codity worker --app hello_app.jobs` (run from the `examples/` directory).

A handler takes the job context and returns a JSON-serialisable result. `async def` handlers
run on the worker's event loop; plain functions run in a thread pool. Either way the context
carries the job id and attempt (to deduplicate side effects: delivery is at-least-once), the
payload, the deadline, a logger whose lines land in `job_logs`, and progress reporting.
"""

from __future__ import annotations

from typing import Any

from codity.worker import JobContext, handler


@handler("hello.greet")
async def greet(ctx: JobContext) -> dict[str, Any]:
    name = str((ctx.payload or {}).get("name", "world"))
    # Field values are redacted like service logs: log sizes and counts, not personal data.
    ctx.logger.info("composing a greeting", name_length=len(name), attempt=ctx.attempt)
    await ctx.progress(50, "composing")
    greeting = f"Hello, {name}!"
    await ctx.progress(100, "done")
    return {"greeting": greeting, "job_id": ctx.job_id, "attempt": ctx.attempt}


@handler("hello.count_words")
def count_words(ctx: JobContext) -> dict[str, int]:
    """A sync handler: it runs in the worker's thread pool, so blocking here is fine."""
    text = str((ctx.payload or {}).get("text", ""))
    ctx.logger.info("counting words", chars=len(text))
    ctx.progress_sync(100, "counted")
    return {"words": len(text.split())}
