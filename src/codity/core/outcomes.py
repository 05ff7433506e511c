"""How an attempt ends: complete, fail (retry or dead-letter), or release (graceful drain).

Each takes many jobs at once, so a worker can flush finished jobs in batches: one statement
updates the jobs and writes their execution rows. Every write is fenced; jobs whose lease was
lost come back in `BatchResult.lease_lost` and nothing changes for them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from codity.core.connection import Conn, transaction
from codity.core.dependencies import cancel_dependants
from codity.core.enqueue import notify_queues
from codity.core.epoch import to_epoch_us_each
from codity.core.fence import BatchResult, Fence, fence_arrays
from codity.core.validation import storable_json, storable_text
from codity.db.queries import sql
from codity.domain.backoff import (
    DEFAULT_BASE_DELAY_MS,
    DEFAULT_MAX_DELAY_MS,
    UniformSource,
    backoff_delay_ms,
)
from codity.domain.states import BackoffStrategy, ExecutionStatus, JobStatus, assert_transition

FailureKind = Literal["error", "timeout", "cancelled", "unknown_handler"]


@dataclass(frozen=True)
class Completion:
    fence: Fence
    result: Any = None
    #: When the handler started; recorded for jobs that complete before being marked running.
    started_at: datetime | None = None


@dataclass(frozen=True)
class Failure:
    fence: Fence
    error: str
    traceback: str | None = None
    kind: FailureKind = "error"
    #: When the handler started (None when it never did, e.g. an unknown handler).
    started_at: datetime | None = None


def _dedupe(items: Sequence[Any]) -> list[Any]:
    # One outcome per attempt per call: an attempt listed twice would write two executions.
    # By fence, not job id: a stale attempt's outcome (it matches no row) must not push out the
    # outcome of the job's current attempt in the same batch.
    if len({item.fence.job_id for item in items}) == len(items):
        return list(items)  # the usual batch: one outcome per job (a set of ints, no UUID hash)
    seen: dict[Fence, Any] = {}
    for item in items:
        seen.setdefault(item.fence, item)
    return list(seen.values())


async def complete(conn: Conn, completions: Sequence[Completion]) -> BatchResult:
    """Mark fenced jobs completed (with their results) and release their dependants.

    One statement, one round trip (complete_jobs in outcomes.sql): atomic on its own, and
    inside the caller's transaction when `conn` has one open.
    """
    items = _dedupe(completions)
    if not items:
        return BatchResult([], [])
    ids, workers, seqs = fence_arrays([c.fence for c in items])
    results = [storable_json(c.result) for c in items]
    # Most jobs return nothing: one NULL array instead of a NULL per job (the driver inspects
    # and encodes every element of an array).
    any_result = any(r is not None for r in results)
    starts = to_epoch_us_each([c.started_at for c in items])
    rows = await conn.fetch(
        sql("complete_jobs"), ids, workers, seqs, results if any_result else None, starts
    )
    return BatchResult.split(ids, [r["id"] for r in rows])


def _decide(
    row: Any, failure: Failure, rng: UniformSource
) -> tuple[JobStatus, int, ExecutionStatus]:
    """(new job status, retry delay ms, execution status) for one failed attempt."""
    current = JobStatus(row["status"])
    if failure.kind == "cancelled":
        target, delay, ex = JobStatus.CANCELLED, 0, ExecutionStatus.CANCELLED
    else:
        ex = ExecutionStatus.TIMED_OUT if failure.kind == "timeout" else ExecutionStatus.FAILED
        out_of_attempts = row["attempt"] >= row["max_attempts"]
        if failure.kind == "unknown_handler" or out_of_attempts:
            target, delay = JobStatus.DEAD_LETTER, 0
        else:
            delay = backoff_delay_ms(
                row["strategy"] or BackoffStrategy.EXPONENTIAL,
                max(row["attempt"], 1),
                row["base_delay_ms"] if row["base_delay_ms"] is not None else DEFAULT_BASE_DELAY_MS,
                row["max_delay_ms"] if row["max_delay_ms"] is not None else DEFAULT_MAX_DELAY_MS,
                row["jitter"] if row["jitter"] is not None else True,
                rng,
            )
            target = JobStatus.SCHEDULED if delay > 0 else JobStatus.QUEUED
    assert_transition(current, target)
    return target, delay, ex


async def fail(
    conn: Conn, failures: Sequence[Failure], *, rng: UniformSource = random
) -> BatchResult:
    """End fenced attempts as failed: retry after backoff while attempts remain, else dead-letter.

    kind="unknown_handler" dead-letters at once (retrying cannot help); kind="cancelled" ends the
    job as cancelled (the worker stopped it on request); kind="timeout" is retried like an error
    but its execution row says timed_out. Dependants of dead-lettered/cancelled jobs are cancelled.
    """
    items = _dedupe(failures)
    if not items:
        return BatchResult([], [])
    ids, workers, seqs = fence_arrays([f.fence for f in items])
    by_attempt = {(f.fence.job_id, f.fence.execution_seq): f for f in items}
    async with transaction(conn) as tx:
        locked = await tx.fetch(sql("lock_failing_jobs"), ids, workers, seqs)
        if not locked:
            return BatchResult.split(ids, [])
        decided = [
            (r, f, *_decide(r, f, rng))
            for r in locked
            for f in (by_attempt[(r["id"], r["execution_seq"])],)
        ]
        moved = await tx.fetch(
            sql("apply_failures"),
            [r["id"] for r, *_ in decided],
            [target.value for _, _, target, _, _ in decided],
            [delay for *_, delay, _ in decided],
            [storable_text(f.error) or "" for _, f, *_ in decided],
            [storable_text(f.traceback) for _, f, *_ in decided],
            [ex.value for *_, ex in decided],
            [f.started_at for _, f, *_ in decided],
        )
        ended = [
            r["id"] for r in moved if r["status"] in (JobStatus.DEAD_LETTER, JobStatus.CANCELLED)
        ]
        await cancel_dependants(tx, ended)
        # A retry due now is claimable, and so, in a limited queue, is a job the ended attempt's
        # slot held back (complete_jobs' `freed` says why).
        limited = {r["id"] for r in locked if r["limited"]}
        await notify_queues(
            tx,
            sorted(
                {
                    r["queue_id"]
                    for r in moved
                    if r["status"] == JobStatus.QUEUED or r["id"] in limited
                }
            ),
        )
    return BatchResult.split(ids, [r["id"] for r in moved])


async def release(conn: Conn, fences: Sequence[Fence]) -> BatchResult:
    """Graceful drain: give jobs back to the queue without charging the attempt."""
    unique = list({f.job_id: f for f in fences}.values())
    if not unique:
        return BatchResult([], [])
    ids, workers, seqs = fence_arrays(unique)
    async with transaction(conn) as tx:
        rows = await tx.fetch(sql("release_jobs"), ids, workers, seqs)
        await notify_queues(tx, sorted({r["queue_id"] for r in rows}))
    return BatchResult.split(ids, [r["id"] for r in rows])
