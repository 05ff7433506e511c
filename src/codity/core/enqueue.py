"""Enqueue: single and bulk, immediate or delayed, idempotent, with dependencies.

Bulk enqueue is one INSERT fed by arrays (unnest), so thousands of jobs cost one round trip.
`enqueue` runs on the caller's connection: called inside the caller's open transaction it
becomes part of it (the job exists if and only if the caller's own writes commit), and the
NOTIFY that wakes idle workers is delivered at that commit, not before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from codity.core.connection import Conn, transaction
from codity.core.queues import QueueInfo
from codity.core.validation import (
    MAX_ATTEMPTS_LIMIT,
    check_handler,
    check_idempotency_key,
    check_positive,
    check_priority,
    check_when,
    payload_size,
)
from codity.db.queries import sql
from codity.domain.errors import QueueNotFoundError, ValidationError
from codity.domain.states import JobStatus

#: LISTEN on this channel to be woken when a queue gets claimable jobs; the payload is the
#: queue id as text.
NOTIFY_CHANNEL: Final = "codity_jobs"


@dataclass(frozen=True)
class NewJob:
    handler: str
    payload: Any = field(default_factory=dict)
    priority: int = 0
    run_at: datetime | None = None
    delay_s: float | None = None
    idempotency_key: str | None = None
    batch_id: UUID | None = None
    depends_on: Sequence[int] = ()
    timeout_ms: int | None = None
    max_attempts: int | None = None
    retry_policy_id: UUID | None = None


@dataclass(frozen=True)
class EnqueuedJob:
    id: int
    status: JobStatus
    created: bool  # False when an idempotency key matched an existing job


@dataclass(frozen=True)
class _QueueDefaults:
    info: QueueInfo
    policy_max_attempts: int | None


@dataclass(frozen=True)
class _Row:
    """One validated job, as the columns insert_jobs takes."""

    handler: str
    payload: Any
    priority: int
    run_at: datetime | None
    delay_ms: float | None
    idempotency_key: str | None
    batch_id: UUID | None
    timeout_ms: int | None
    max_attempts: int
    retry_policy_id: UUID | None
    pending: int
    schedule_id: UUID | None
    depends_on: tuple[int, ...]


async def _queue_defaults(conn: Conn, queue_id: UUID) -> _QueueDefaults:
    row = await conn.fetchrow(sql("queue_for_enqueue"), queue_id)
    if row is None:
        raise QueueNotFoundError(f"no queue with id {queue_id}", details={"queue": str(queue_id)})
    return _QueueDefaults(QueueInfo.from_row(row), row["policy_max_attempts"])


def _check_depends_on(depends_on: Sequence[int]) -> tuple[int, ...]:
    ids: list[int] = []
    for dep in depends_on:
        if isinstance(dep, bool) or not isinstance(dep, int) or dep <= 0:
            raise ValidationError(f"depends_on must hold job ids (positive integers), got {dep!r}")
        ids.append(dep)
    return tuple(dict.fromkeys(ids))


async def _policy_attempts(conn: Conn, project_id: UUID, jobs: Sequence[NewJob]) -> dict[UUID, int]:
    wanted = sorted({j.retry_policy_id for j in jobs if j.retry_policy_id is not None})
    if not wanted:
        return {}
    rows = await conn.fetch(sql("retry_policies_max_attempts"), wanted, project_id)
    found = {r["id"]: r["max_attempts"] for r in rows}
    missing = [str(p) for p in wanted if p not in found]
    if missing:
        raise ValidationError(
            f"unknown retry policy {', '.join(missing)}", details={"retry_policy_ids": missing}
        )
    return found


def _validate(
    job: NewJob, q: _QueueDefaults, policies: dict[UUID, int], schedule_id: UUID | None
) -> _Row:
    if not isinstance(job, NewJob):
        raise ValidationError("each job must be a NewJob")
    handler = check_handler(job.handler)
    payload_size(job.payload)
    run_at, delay_ms = check_when(job.run_at, job.delay_s)
    max_attempts = check_positive("max_attempts", job.max_attempts, upper=MAX_ATTEMPTS_LIMIT)
    if max_attempts is None:
        if job.retry_policy_id is not None:
            max_attempts = policies[job.retry_policy_id]
        elif q.policy_max_attempts is not None:
            max_attempts = q.policy_max_attempts
        else:
            max_attempts = q.info.default_max_attempts
    timeout_ms = check_positive("timeout_ms", job.timeout_ms, upper=2**31 - 1)
    return _Row(
        handler=handler,
        payload=job.payload,
        priority=check_priority(job.priority),
        run_at=run_at,
        delay_ms=delay_ms,
        idempotency_key=check_idempotency_key(job.idempotency_key),
        batch_id=job.batch_id,
        timeout_ms=timeout_ms if timeout_ms is not None else q.info.default_timeout_ms,
        max_attempts=max_attempts,
        retry_policy_id=job.retry_policy_id,
        pending=0,
        schedule_id=schedule_id,
        depends_on=_check_depends_on(job.depends_on),
    )


async def _count_pending(conn: Conn, project_id: UUID, rows: list[_Row]) -> list[_Row]:
    """Lock the jobs depended on and set each row's pending_dependencies."""
    wanted = sorted({d for r in rows for d in r.depends_on})
    if not wanted:
        return rows
    locked = await conn.fetch(sql("lock_dependencies"), wanted, project_id)
    status = {r["id"]: r["status"] for r in locked}
    unknown = [d for d in wanted if d not in status]
    if unknown:
        raise ValidationError(
            f"depends_on names unknown job ids: {', '.join(map(str, unknown))}",
            details={"unknown_job_ids": unknown},
        )
    doomed = [d for d in wanted if status[d] in (JobStatus.CANCELLED, JobStatus.DEAD_LETTER)]
    if doomed:
        raise ValidationError(
            f"depends_on names jobs that can never complete (cancelled or dead-lettered): "
            f"{', '.join(map(str, doomed))}",
            details={"job_ids": doomed},
        )
    out = []
    for r in rows:
        pending = sum(1 for d in r.depends_on if status[d] != JobStatus.COMPLETED)
        out.append(dataclasses.replace(r, pending=pending))
    return out


async def _insert(conn: Conn, queue_id: UUID, rows: list[_Row]) -> list[EnqueuedJob]:
    records = await conn.fetch(
        sql("insert_jobs"),
        queue_id,
        [r.handler for r in rows],
        [r.payload for r in rows],
        [r.priority for r in rows],
        [r.run_at for r in rows],
        [r.delay_ms for r in rows],
        [r.idempotency_key for r in rows],
        [r.batch_id for r in rows],
        [r.timeout_ms for r in rows],
        [r.max_attempts for r in rows],
        [r.retry_policy_id for r in rows],
        [r.pending for r in rows],
        [r.schedule_id for r in rows],
    )
    results: list[EnqueuedJob | None] = []
    first_by_key: dict[str, EnqueuedJob] = {}
    missing_keys: set[str] = set()
    for rec in records:
        if rec["id"] is None:
            results.append(None)
            missing_keys.add(rec["idempotency_key"])
            continue
        job = EnqueuedJob(rec["id"], JobStatus(rec["status"]), created=True)
        results.append(job)
        if rec["idempotency_key"] is not None:
            first_by_key.setdefault(rec["idempotency_key"], job)
    # Idempotency-key repeats: the job made earlier in this batch, else the one already stored.
    existing: dict[str, EnqueuedJob] = {
        k: EnqueuedJob(j.id, j.status, created=False) for k, j in first_by_key.items()
    }
    lookup = sorted(missing_keys - existing.keys())
    if lookup:
        for rec in await conn.fetch(sql("jobs_by_idempotency_key"), queue_id, lookup):
            existing[rec["idempotency_key"]] = EnqueuedJob(
                rec["id"], JobStatus(rec["status"]), created=False
            )
    return [
        made if made is not None else existing[rec["idempotency_key"]]
        for rec, made in zip(records, results, strict=True)
    ]


async def _enqueue_rows(
    conn: Conn,
    queue_id: UUID,
    jobs: Sequence[NewJob],
    schedule_ids: Sequence[UUID | None] | None = None,
) -> list[EnqueuedJob]:
    if not jobs:
        return []
    q = await _queue_defaults(conn, queue_id)
    policies = await _policy_attempts(conn, q.info.project_id, jobs)
    sids = schedule_ids or [None] * len(jobs)
    rows = [_validate(j, q, policies, s) for j, s in zip(jobs, sids, strict=True)]
    if not any(r.depends_on for r in rows):
        return await _insert(conn, queue_id, rows)
    async with transaction(conn) as tx:
        rows = await _count_pending(tx, q.info.project_id, rows)
        result = await _insert(tx, queue_id, rows)
        dependants: list[int] = []
        depended: list[int] = []
        for row, job in zip(rows, result, strict=True):
            if job.created:
                dependants.extend([job.id] * len(row.depends_on))
                depended.extend(row.depends_on)
        if dependants:
            await tx.execute(sql("insert_job_dependencies"), dependants, depended)
        return result


async def enqueue(conn: Conn, queue_id: UUID, job: NewJob) -> EnqueuedJob:
    """Enqueue one job (inside the caller's transaction when one is open on `conn`).

    Raises QueueNotFoundError, ValidationError, PayloadTooLargeError before writing anything.
    """
    return (await _enqueue_rows(conn, queue_id, [job]))[0]


async def enqueue_many(conn: Conn, queue_id: UUID, jobs: Sequence[NewJob]) -> list[EnqueuedJob]:
    """Enqueue many jobs in one INSERT; results are in input order. All or nothing on bad input."""
    return await _enqueue_rows(conn, queue_id, list(jobs))


async def notify_queues(conn: Conn, queue_ids: Sequence[UUID]) -> None:
    """Wake workers listening on NOTIFY_CHANNEL for these queues."""
    if queue_ids:
        await conn.execute(sql("notify_queues"), list(queue_ids))
