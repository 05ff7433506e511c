"""Operator actions on single jobs: cancel and retry.

These move one job in Python, so they lock it, check the move against the allowed-map
(`assert_transition`: an illegal one raises IllegalTransitionError), then write.

Every operation takes the project and finds the job only inside it: a job id of another
tenant is "not found", whatever the caller checked (or forgot to check) before.
"""

from __future__ import annotations

from uuid import UUID

from codity.core.connection import Conn, transaction
from codity.core.dependencies import cancel_dependants
from codity.core.enqueue import notify_queues
from codity.db.queries import sql
from codity.domain.errors import IllegalTransitionError, JobNotFoundError
from codity.domain.states import LEASED_STATUSES, JobStatus, assert_transition


def _not_found(job_id: int) -> JobNotFoundError:
    return JobNotFoundError(f"no job {job_id} in this project", details={"job_id": job_id})


async def cancel_job(conn: Conn, project_id: UUID, job_id: int) -> JobStatus:
    """Cancel a job of the project; returns its status afterwards.

    waiting/queued/scheduled: cancelled now. claimed/running: cancel_requested_at is set and the
    job stays leased; the worker sees the request at its next heartbeat and reports it.
    Already cancelled: nothing to do. Jobs that depend on a cancelled job are cancelled too.
    """
    async with transaction(conn) as tx:
        row = await tx.fetchrow(sql("lock_job"), job_id, project_id)
        if row is None:
            raise _not_found(job_id)
        current = JobStatus(row["status"])
        if current is JobStatus.CANCELLED:
            return current
        if current in LEASED_STATUSES:
            await tx.execute(sql("request_cancel"), job_id)
            return current
        assert_transition(current, JobStatus.CANCELLED)
        await tx.execute(sql("cancel_now"), job_id)
        await cancel_dependants(tx, [job_id])
        return JobStatus.CANCELLED


async def retry_job(conn: Conn, project_id: UUID, job_id: int) -> JobStatus:
    """A failed, dead-lettered or cancelled job of the project goes back to 'queued' with
    attempt reset to 0."""
    async with transaction(conn) as tx:
        row = await tx.fetchrow(sql("lock_job"), job_id, project_id)
        if row is None:
            raise _not_found(job_id)
        current = JobStatus(row["status"])
        if current not in (JobStatus.FAILED, JobStatus.DEAD_LETTER, JobStatus.CANCELLED):
            # Retrying a queued or running job would double-run it; completed is final.
            raise IllegalTransitionError(current.value, JobStatus.QUEUED.value)
        assert_transition(current, JobStatus.QUEUED)
        await tx.fetch(sql("requeue_job"), [job_id])
        await tx.execute(sql("mark_dead_letters_replayed"), [job_id])
        await notify_queues(tx, [row["queue_id"]])
        return JobStatus.QUEUED
