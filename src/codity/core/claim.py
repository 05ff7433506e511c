"""Claim: hand queued jobs to a worker, never the same job to two workers.

The statement is `claim_jobs` in db/sql/claim.sql: ONE statement (one round trip) for every
queue a worker serves, best queue first, never more than `limit` jobs in total. Pauses and
concurrency limits are read inside it (no query before it); FOR UPDATE SKIP LOCKED means no job
is handed out twice; a limited queue's row is locked and its leased jobs counted with a fresh
snapshot, so claimers of that queue take turns and the limit is never over-admitted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from codity.core.connection import Conn
from codity.core.fence import Fence
from codity.db.queries import sql
from codity.domain.errors import ValidationError


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    queue_id: UUID
    handler: str
    payload: Any
    attempt: int
    max_attempts: int
    execution_seq: int
    timeout_ms: int | None
    lock_expires_at: datetime
    priority: int
    worker_id: UUID  # who holds the lease: part of the fence
    #: W3C traceparent of the enqueuing span, when it was traced (the attempt's span links it).
    trace_parent: str | None = None
    #: When it became due: with priority and id, its place in the claim order (see ClaimCursor).
    run_at: datetime | None = None

    #: (job id, worker id, execution_seq): built once, every later write names it.
    fence: Fence = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "fence",
            Fence(job_id=self.id, worker_id=self.worker_id, execution_seq=self.execution_seq),
        )


def _job(row: Any, worker_id: UUID) -> ClaimedJob:
    return ClaimedJob(
        id=row["id"],
        queue_id=row["queue_id"],
        handler=row["handler"],
        payload=row["payload"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        execution_seq=row["execution_seq"],
        timeout_ms=row["timeout_ms"],
        lock_expires_at=row["lock_expires_at"],
        priority=row["priority"],
        worker_id=worker_id,
        trace_parent=row["trace_parent"],
        run_at=row["run_at"],
    )


def _claim_order(row: Any) -> tuple[int, int, datetime, int]:
    # Best queue first, then the claim index's own order (priority DESC, run_at, id).
    return (row["pos"], -row["priority"], row["run_at"], row["id"])


@dataclass(frozen=True, slots=True)
class ClaimCursor:
    """Where a claimer's last claim from a queue ended, in the claim index's order.

    The next claim of that queue starts after it at this priority (higher priorities are still
    read from the front): the index entries of jobs it already claimed are skipped instead of
    stepped over. While a long transaction pins the xmin horizon those entries cannot be
    vacuumed and a claim from the front of the index would visit every one of them. A job that
    comes back with an older key (released, reaped, promoted) is found by the next claim made
    without a cursor, which the claimer makes every so often (worker.producer).
    """

    priority: int
    run_at: datetime
    id: int

    @classmethod
    def after(cls, job: ClaimedJob) -> ClaimCursor | None:
        return None if job.run_at is None else cls(job.priority, job.run_at, job.id)


async def claim(
    conn: Conn,
    worker_id: UUID,
    queue_ids: Sequence[UUID],
    limit: int,
    lease_ms: int,
    cursors: Mapping[UUID, ClaimCursor] | None = None,
) -> list[ClaimedJob]:
    """Claim up to `limit` jobs from `queue_ids` for `worker_id`, leased for `lease_ms`.

    One statement for all the queues (see claim_jobs in claim.sql). Each job moves
    queued -> claimed with attempt + 1 and execution_seq + 1. Paused queues yield nothing;
    concurrency-limited queues never exceed their limit. Size `limit` to the free slots.
    `cursors`: per queue, start after where the previous claim ended (see ClaimCursor).
    """
    if limit <= 0 or not queue_ids:
        return []
    if lease_ms <= 0:
        raise ValidationError(f"lease_ms must be positive, got {lease_ms}")
    ids = list(queue_ids)
    at = [cursors.get(q) for q in ids] if cursors else None
    rows = await conn.fetch(
        sql("claim_jobs"),
        worker_id,
        lease_ms,
        ids,
        limit,
        [c.priority if c else None for c in at] if at else None,
        [c.run_at if c else None for c in at] if at else None,
        [c.id if c else None for c in at] if at else None,
    )
    return [_job(r, worker_id) for r in sorted(rows, key=_claim_order)]
