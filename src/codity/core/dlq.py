"""The dead-letter queue: jobs that ran out of attempts, with a copy of what they were.

Replay puts the original job back to 'queued' with a fresh attempt budget (its next claim gets a
new execution_seq); if the original was purged, a new job is enqueued from the copy. Discard
deletes the dead letter only (the job row, if any, stays as history).

Every operation takes the project: a dead-letter id of another tenant is "not found", and a
request naming one changes nothing at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from codity.core.connection import Conn, transaction
from codity.core.enqueue import NewJob, _enqueue_rows, notify_queues
from codity.db.queries import sql
from codity.domain.errors import DeadLetterNotFoundError
from codity.domain.states import JobStatus


def _not_found(ids: Sequence[str]) -> DeadLetterNotFoundError:
    return DeadLetterNotFoundError(
        f"no dead letter {', '.join(ids)} in this project", details={"ids": list(ids)}
    )


async def replay_dead_letters(
    conn: Conn, project_id: UUID, dead_letter_ids: Sequence[UUID]
) -> list[int]:
    """Re-queue the jobs of the project's dead letters; returns the job ids now queued.

    Raises DeadLetterNotFoundError (writing nothing) when an id is not the project's. A dead
    letter whose job has already left the dead_letter state (replayed before and running
    again) is skipped.
    """
    wanted = list(dict.fromkeys(dead_letter_ids))
    if not wanted:
        return []
    async with transaction(conn) as tx:
        rows = await tx.fetch(sql("lock_dead_letters"), wanted, project_id)
        unknown = sorted(set(map(str, wanted)) - {str(r["id"]) for r in rows})
        if unknown:
            raise _not_found(unknown)
        requeue = sorted({r["job_id"] for r in rows if r["job_status"] == JobStatus.DEAD_LETTER})
        replayed_rows = [r for r in rows if r["job_status"] == JobStatus.DEAD_LETTER]
        queued: list[int] = []
        if requeue:
            moved = await tx.fetch(sql("requeue_job"), requeue)
            queued.extend(r["id"] for r in moved)
        new_ids: list[int | None] = [None] * len(replayed_rows)
        for r in rows:
            if r["job_id"] is None:  # the original was purged: enqueue afresh from the copy
                (job,) = await _enqueue_rows(
                    tx, r["queue_id"], [NewJob(handler=r["handler"], payload=r["payload"])]
                )
                queued.append(job.id)
                replayed_rows.append(r)
                new_ids.append(job.id)
        if replayed_rows:
            await tx.execute(
                sql("mark_dead_letter_rows_replayed"), [r["id"] for r in replayed_rows], new_ids
            )
        await notify_queues(tx, sorted({r["queue_id"] for r in replayed_rows}))
    return queued


async def replay_queue_dead_letters(
    conn: Conn, project_id: UUID, queue_id: UUID, *, limit: int | None = None
) -> list[int]:
    """Replay the not-yet-replayed dead letters of one of the project's queues, oldest first:
    all of them, or at most `limit` (what the caller counted against a quota)."""
    async with transaction(conn) as tx:
        pending = await tx.fetch(sql("pending_dead_letters_of_queue"), queue_id, project_id, limit)
        return await replay_dead_letters(tx, project_id, [r["id"] for r in pending])


async def discard_dead_letters(
    conn: Conn, project_id: UUID, dead_letter_ids: Sequence[UUID]
) -> int:
    """Delete the project's dead letters; returns how many were deleted.

    All or nothing: when one id is not the project's, DeadLetterNotFoundError and nothing is
    deleted."""
    wanted = list(dict.fromkeys(dead_letter_ids))
    if not wanted:
        return 0
    async with transaction(conn) as tx:
        deleted = {r["id"] for r in await tx.fetch(sql("discard_dead_letters"), wanted, project_id)}
        unknown = sorted(str(i) for i in wanted if i not in deleted)
        if unknown:
            raise _not_found(unknown)  # leaves the transaction: nothing was deleted
    return len(deleted)
