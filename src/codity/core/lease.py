"""Leases after the claim: start, heartbeat, progress and logs, all fenced.

One heartbeat statement per worker extends the leases of the jobs the worker really has in hand
(their fences), reports which of those are gone (lease lost), gives back at once any job leased
under the worker's id that it does not hold, and tells the worker which of its jobs an operator
asked to cancel, so cancellation needs no extra polling.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from codity.core.connection import Conn
from codity.core.fence import BatchResult, Fence, fence_arrays
from codity.core.validation import storable_text
from codity.db.queries import sql
from codity.domain.errors import ValidationError

#: job_logs.message has a CHECK of 4096 bytes; longer lines are cut, not rejected.
MAX_LOG_MESSAGE_BYTES: Final = 4096


@dataclass(frozen=True)
class HeartbeatResult:
    #: How many of the held leases were extended.
    extended: int
    #: Held jobs whose operator asked to cancel them.
    cancel_requested: list[int]
    #: Held jobs whose lease is gone (reaped, re-claimed): stop them, never record them.
    lost: list[int] = field(default_factory=list)
    #: Jobs leased under this worker's id that it did not hold: given back to the queue.
    released: list[int] = field(default_factory=list)
    #: The held attempts (fences) behind `lost` and `cancel_requested`: a worker may hold two
    #: attempts of one job (a stale one whose lease was reaped, and the job claimed again), and
    #: only the fence says which attempt to stop.
    lost_fences: list[Fence] = field(default_factory=list)
    cancel_fences: list[Fence] = field(default_factory=list)


@dataclass(frozen=True)
class LogEntry:
    level: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)
    at: datetime | None = None


async def mark_running(
    conn: Conn, fences: Sequence[Fence], started_at: Sequence[datetime | None] | None = None
) -> BatchResult:
    """claimed -> running for each fenced job; `started_at[i]` is when its handler started
    (default: now)."""
    if not fences:
        return BatchResult([], [])
    if started_at is not None and len(started_at) != len(fences):
        raise ValidationError("mark_running needs one start time per fence")
    ids, workers, seqs = fence_arrays(fences)
    starts = list(started_at) if started_at is not None else [None] * len(fences)
    rows = await conn.fetch(sql("mark_running"), ids, workers, seqs, starts)
    return BatchResult.split(ids, [r["id"] for r in rows])


async def heartbeat(
    conn: Conn,
    worker_id: UUID,
    lease_ms: int,
    held: Sequence[Fence],
    in_flight: int = 0,
    *,
    lingering_threads: int = 0,
) -> HeartbeatResult:
    """Extend the leases of the jobs `worker_id` holds (`held`) to now + lease_ms, in one
    statement; every other job leased under its id goes back to the queue (attempt refunded).

    The caller must not have a claim in flight while it beats: a job that claim just leased
    would not be in `held` yet and would be given back. `lingering_threads` (sync handlers whose
    attempt ended but whose thread still runs) is shown in the worker's row.
    """
    if lease_ms <= 0:
        raise ValidationError(f"lease_ms must be positive, got {lease_ms}")
    mine = [f for f in held if f.worker_id == worker_id]
    row = await conn.fetchrow(
        sql("heartbeat"),
        worker_id,
        lease_ms,
        max(in_flight, 0),
        [f.job_id for f in mine],
        [f.execution_seq for f in mine],
        max(lingering_threads, 0),
    )
    extended = set(zip(row["extended"], row["extended_seqs"], strict=True))
    lost = [f for f in mine if (f.job_id, f.execution_seq) not in extended]
    cancel = set(row["cancel_requested"])
    return HeartbeatResult(
        extended=len(extended),
        cancel_requested=list(row["cancel_requested"]),
        lost=sorted({f.job_id for f in lost}),
        released=list(row["released"]),
        lost_fences=lost,
        cancel_fences=[
            f for f in mine if f.job_id in cancel and (f.job_id, f.execution_seq) in extended
        ],
    )


async def report_progress(conn: Conn, fence: Fence, pct: int, message: str | None = None) -> bool:
    """Record progress (0-100). False when the lease is lost (nothing written)."""
    if isinstance(pct, bool) or not isinstance(pct, int) or not 0 <= pct <= 100:
        raise ValidationError(f"progress must be an integer from 0 to 100, got {pct!r}")
    row = await conn.fetchval(
        sql("report_progress"),
        fence.job_id,
        fence.worker_id,
        fence.execution_seq,
        pct,
        storable_text(message),
    )
    return row is not None


def _jsonable(fields: dict[str, Any]) -> Any:
    # Handler log fields are arbitrary; anything JSON cannot hold is stored as its str().
    return json.loads(json.dumps(fields or {}, default=str))


def _clip(message: str) -> str:
    message = storable_text(message) or ""
    raw = message.encode()
    if len(raw) <= MAX_LOG_MESSAGE_BYTES:
        return message
    return raw[: MAX_LOG_MESSAGE_BYTES - 3].decode(errors="ignore") + "..."


async def append_logs(conn: Conn, fence: Fence, entries: Sequence[LogEntry]) -> bool:
    """Store a handler's log lines for this execution. False when the lease is lost."""
    row = await conn.fetchrow(
        sql("append_logs"),
        fence.job_id,
        fence.worker_id,
        fence.execution_seq,
        [storable_text(e.level) or "info" for e in entries],
        [_clip(e.message) for e in entries],
        [_jsonable(e.fields) for e in entries],
        [e.at for e in entries],
    )
    return bool(row["held"])
