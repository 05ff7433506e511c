"""The chaos suite's handler, loaded into real `codity worker` processes with `--app`.

Each run appends two lines to a ledger file of its own process (`$CODITY_CHAOS_LEDGER/<pid>.jsonl`):
one when the handler starts, one when it ends (`ok`, or `cancelled`). Plain `os.write` on an
O_APPEND descriptor, no buffer: what was written survives a SIGKILL a moment later. The ledger
lives outside the database on purpose: it must record runs the database never heard of (a
completion lost with its connection) and keep working while PostgreSQL is down.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from codity.worker import JobContext, handler

_fd: int | None = None


def _write(entry: dict[str, Any]) -> None:
    global _fd
    if _fd is None:
        path = Path(os.environ["CODITY_CHAOS_LEDGER"]) / f"{os.getpid()}.jsonl"
        _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_fd, (json.dumps(entry) + "\n").encode())


@handler("chaos.record")
async def record(ctx: JobContext) -> dict[str, Any]:
    run = {"job": ctx.job_id, "seq": ctx.execution_seq, "pid": os.getpid()}
    _write({**run, "ev": "start", "t": time.time()})
    outcome = "cancelled"
    try:
        await asyncio.sleep(float((ctx.payload or {}).get("ms", 10)) / 1000)
        outcome = "ok"
    finally:
        _write({**run, "ev": "end", "t": time.time(), "outcome": outcome})
    return {"seq": ctx.execution_seq}
