"""Operator actions on many jobs at once (the API's bulk actions): cancel, retry, delete.

The caller has locked the rows (FOR UPDATE SKIP LOCKED, at most one chunk of them) and passes
them in; each function applies exactly the rule of the single-job operation
(`codity.core.operations`) to every row, with one statement per kind of change instead of one
per job, and returns the ids it changed. A row the rule refuses is left alone (the caller counts
it as skipped): nothing here raises for one job in a state that does not fit.

- cancel: waiting/queued/scheduled -> cancelled now (and their dependants, as for one);
  claimed/running -> cancel requested (the worker stops the handler); a cancel already
  requested, and finished or failed jobs, are skipped.
- retry: failed/dead_letter/cancelled -> queued with attempt 0, their pending dead letters
  marked replayed, the queues' workers woken; anything else is skipped.
- delete: only finished jobs (completed/cancelled/dead_letter), as retention deletes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from codity.core.connection import Conn
from codity.core.dependencies import cancel_dependants
from codity.core.enqueue import notify_queues
from codity.db.queries import sql
from codity.domain.states import LEASED_STATUSES, TERMINAL_STATUSES, JobStatus, assert_transition

#: What retry may restart (core.operations.retry_job's rule).
RETRYABLE = frozenset({JobStatus.FAILED, JobStatus.DEAD_LETTER, JobStatus.CANCELLED})


async def cancel_jobs(tx: Conn, rows: Sequence[Mapping[str, Any]]) -> list[int]:
    now: list[int] = []
    requested: list[int] = []
    for row in rows:
        status = JobStatus(row["status"])
        if status in LEASED_STATUSES:
            if row["cancel_requested_at"] is None:
                requested.append(row["id"])
        elif status in (JobStatus.WAITING, JobStatus.QUEUED, JobStatus.SCHEDULED):
            assert_transition(status, JobStatus.CANCELLED)
            now.append(row["id"])
    if requested:
        await tx.execute(sql("request_cancel_many"), requested)
    if now:
        await tx.execute(sql("cancel_now_many"), now)
        await cancel_dependants(tx, now)
    return sorted(now + requested)


async def retry_jobs(tx: Conn, rows: Sequence[Mapping[str, Any]]) -> list[int]:
    chosen = [r for r in rows if JobStatus(r["status"]) in RETRYABLE]
    for row in chosen:
        assert_transition(JobStatus(row["status"]), JobStatus.QUEUED)
    if not chosen:
        return []
    ids = [r["id"] for r in chosen]
    await tx.fetch(sql("requeue_job"), ids)
    await tx.execute(sql("mark_dead_letters_replayed"), ids)
    await notify_queues(tx, sorted({r["queue_id"] for r in chosen}))
    return ids


async def delete_jobs(tx: Conn, rows: Sequence[Mapping[str, Any]]) -> list[int]:
    ids = [r["id"] for r in rows if JobStatus(r["status"]) in TERMINAL_STATUSES]
    if not ids:
        return []
    deleted = await tx.fetch(sql("delete_finished_jobs"), ids)
    return sorted(r["id"] for r in deleted)
