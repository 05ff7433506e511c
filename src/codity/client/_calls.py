"""Each API operation the client offers, once, as a `Call` builder (used by both clients)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from codity.client import models as m
from codity.client._http import Call, body_of, model, nothing

Id = UUID | str


def _p(project_id: Id) -> str:
    return f"/projects/{project_id}"


# -- jobs -------------------------------------------------------------------------------------


def enqueue(project_id: Id, job: m.JobCreate, idempotency_key: str | None) -> Call[m.JobPublic]:
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    return Call("POST", f"{_p(project_id)}/jobs", model(m.JobPublic), body=body_of(job),
                headers=headers)  # fmt: skip


def enqueue_many(project_id: Id, jobs: m.JobsBulkCreate) -> Call[m.JobsBulkResult]:
    return Call("POST", f"{_p(project_id)}/jobs/bulk", model(m.JobsBulkResult), body=body_of(jobs))


def get_job(project_id: Id, job_id: int) -> Call[m.JobDetail]:
    return Call("GET", f"{_p(project_id)}/jobs/{job_id}", model(m.JobDetail))


def list_jobs(project_id: Id, cursor: str | None, filters: dict[str, Any]) -> Call[m.JobsPage]:
    return Call("GET", f"{_p(project_id)}/jobs", model(m.JobsPage),
                params={**filters, "cursor": cursor})  # fmt: skip


def job_logs(project_id: Id, job_id: int, cursor: str | None, limit: int) -> Call[m.JobLogsPage]:
    return Call("GET", f"{_p(project_id)}/jobs/{job_id}/logs", model(m.JobLogsPage),
                params={"cursor": cursor, "limit": limit})  # fmt: skip


def cancel_job(project_id: Id, job_id: int) -> Call[m.JobPublic]:
    return Call("POST", f"{_p(project_id)}/jobs/{job_id}/cancel", model(m.JobPublic))


def retry_job(project_id: Id, job_id: int) -> Call[m.JobPublic]:
    return Call("POST", f"{_p(project_id)}/jobs/{job_id}/retry", model(m.JobPublic))


# -- queues -----------------------------------------------------------------------------------


def list_queues(project_id: Id, cursor: str | None, limit: int) -> Call[m.QueuesPage]:
    return Call("GET", f"{_p(project_id)}/queues", model(m.QueuesPage),
                params={"cursor": cursor, "limit": limit})  # fmt: skip


def get_queue(project_id: Id, queue_id: Id) -> Call[m.QueuePublic]:
    return Call("GET", f"{_p(project_id)}/queues/{queue_id}", model(m.QueuePublic))


def create_queue(project_id: Id, queue: m.QueueCreate) -> Call[m.QueuePublic]:
    return Call("POST", f"{_p(project_id)}/queues", model(m.QueuePublic), body=body_of(queue))


def pause_queue(project_id: Id, queue_id: Id) -> Call[m.QueuePublic]:
    return Call("POST", f"{_p(project_id)}/queues/{queue_id}/pause", model(m.QueuePublic))


def resume_queue(project_id: Id, queue_id: Id) -> Call[m.QueuePublic]:
    return Call("POST", f"{_p(project_id)}/queues/{queue_id}/resume", model(m.QueuePublic))


def delete_queue(project_id: Id, queue_id: Id) -> Call[None]:
    return Call("DELETE", f"{_p(project_id)}/queues/{queue_id}", nothing)


# -- dead letters, schedules, workers ---------------------------------------------------------


def list_dead_letters(
    project_id: Id, cursor: str | None, filters: dict[str, Any]
) -> Call[m.DeadLettersPage]:
    return Call("GET", f"{_p(project_id)}/dead-letters", model(m.DeadLettersPage),
                params={**filters, "cursor": cursor})  # fmt: skip


def replay_dead_letters(project_id: Id, replay: m.DeadLetterReplay) -> Call[m.ReplayResult]:
    return Call("POST", f"{_p(project_id)}/dead-letters/replay", model(m.ReplayResult),
                body=body_of(replay))  # fmt: skip


def list_schedules(project_id: Id, cursor: str | None, limit: int) -> Call[m.SchedulesPage]:
    return Call("GET", f"{_p(project_id)}/schedules", model(m.SchedulesPage),
                params={"cursor": cursor, "limit": limit})  # fmt: skip


def create_schedule(project_id: Id, schedule: m.ScheduleCreate) -> Call[m.SchedulePublic]:
    return Call("POST", f"{_p(project_id)}/schedules", model(m.SchedulePublic),
                body=body_of(schedule))  # fmt: skip


def trigger_schedule(project_id: Id, schedule_id: Id) -> Call[m.ScheduleTriggered]:
    return Call("POST", f"{_p(project_id)}/schedules/{schedule_id}/trigger",
                model(m.ScheduleTriggered))  # fmt: skip


def list_workers(
    project_id: Id, cursor: str | None, filters: dict[str, Any]
) -> Call[m.WorkersPage]:
    return Call("GET", f"{_p(project_id)}/workers", model(m.WorkersPage),
                params={**filters, "cursor": cursor})  # fmt: skip


def overview(project_id: Id) -> Call[m.Overview]:
    return Call("GET", f"{_p(project_id)}/overview", model(m.Overview))
