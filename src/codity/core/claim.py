"""Claim: hand queued jobs to a worker, never the same job to two workers.

The statement is `claim_jobs` in db/sql/claim.sql (FOR UPDATE SKIP LOCKED). Several queues are
served best queue first (queues.priority), each asked for what is still wanted, so a claim
never returns more than `limit` jobs. A queue with a concurrency limit is claimed inside a
transaction that first locks the queue row, then counts its leased jobs, then claims at most
the free slots: claimers of that queue take turns, so the limit is never over-admitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from codity.core.connection import Conn, transaction
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

    @property
    def fence(self) -> Fence:
        return Fence(job_id=self.id, worker_id=self.worker_id, execution_seq=self.execution_seq)


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
    )


async def _claim_limited(
    conn: Conn, worker_id: UUID, queue_id: UUID, want: int, lease_ms: int
) -> list[Any]:
    async with transaction(conn) as tx:
        queue = await tx.fetchrow(sql("lock_queue_for_claim"), queue_id)
        if queue is None or queue["is_paused"]:
            return []
        limit = queue["concurrency_limit"]
        if limit is not None:
            leased = await tx.fetchval(sql("count_leased_in_queue"), queue_id)
            want = min(want, limit - leased)
            if want <= 0:
                return []
        return list(await tx.fetch(sql("claim_jobs"), worker_id, lease_ms, queue_id, want))


async def claim(
    conn: Conn, worker_id: UUID, queue_ids: Sequence[UUID], limit: int, lease_ms: int
) -> list[ClaimedJob]:
    """Claim up to `limit` jobs from `queue_ids` for `worker_id`, leased for `lease_ms`.

    Each job moves queued -> claimed with attempt + 1 and execution_seq + 1. Paused queues
    yield nothing. Size `limit` to the worker's free slots.
    """
    if limit <= 0 or not queue_ids:
        return []
    if lease_ms <= 0:
        raise ValidationError(f"lease_ms must be positive, got {lease_ms}")
    queues = await conn.fetch(sql("claim_queues_info"), list(dict.fromkeys(queue_ids)))
    claimed: list[ClaimedJob] = []
    for q in queues:
        want = limit - len(claimed)
        if want <= 0:
            break
        if q["is_paused"]:
            continue
        if q["concurrency_limit"] is None:
            rows = await conn.fetch(sql("claim_jobs"), worker_id, lease_ms, q["id"], want)
        else:
            rows = await _claim_limited(conn, worker_id, q["id"], want, lease_ms)
        claimed.extend(_job(r, worker_id) for r in rows)
    return claimed
