"""Handlers for the acceptance tests, loaded into real worker processes with `--app`."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from codity.worker import JobContext, handler


@handler("ledger.record")
async def record(ctx: JobContext) -> None:
    """Write one ledger row per execution: a job run twice would show up twice."""
    await ctx.db.execute(
        "INSERT INTO ledger (job_id, execution_seq, pid) VALUES ($1, $2, $3)",
        ctx.job_id,
        ctx.execution_seq,
        os.getpid(),
    )


@handler("nap.first")
async def nap_first(ctx: JobContext) -> dict[str, Any]:
    """The first execution of a job sleeps (long enough to be killed); later ones return at once."""
    if ctx.execution_seq == 1:
        await asyncio.sleep(float((ctx.payload or {}).get("seconds", 60)))
    return {"execution_seq": ctx.execution_seq, "pid": os.getpid()}
