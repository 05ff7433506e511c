"""Jobs of a project: filtered keyset lists, the detail view (executions, logs, payload), log
pages. SQL: `db/sql/api_jobs.sql`. Enqueue, cancel and retry are `codity.core` operations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from codity.api.schemas.jobs import (
    ExecutionPublic,
    JobBlocker,
    JobDetail,
    JobExplanation,
    JobLogPublic,
    JobPublic,
)
from codity.core import Conn
from codity.db.queries import Fragments, bind
from codity.domain.errors import JobNotFoundError
from codity.domain.flow import ExplainFacts, explain
from codity.domain.states import JobStatus

#: Log lines the detail view carries; the rest is one `GET .../logs` away.
DETAIL_LOG_LINES = 100
#: A job id is a bigint: longer digit strings cannot be one.
_MAX_ID_DIGITS = 18


@dataclass(frozen=True)
class JobFilter:
    queue_id: UUID | None = None
    statuses: Sequence[JobStatus] = ()
    handler: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    batch_id: UUID | None = None
    text: str | None = None
    payload_match: dict[str, Any] | None = None
    error_text: str | None = None


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def filter_fragments(f: JobFilter, *, payload: bool = True) -> Fragments:
    """Only the conditions asked for are in the statement, each one a plain index condition.
    `payload=False`: leave the payload search out (api_jobs_list_by_payload carries it)."""
    where = Fragments()
    if f.queue_id is not None:
        where.add("api_jobs_when_queue", queue_id=f.queue_id)
    if f.statuses:
        where.add("api_jobs_when_status", statuses=[s.value for s in f.statuses])
    if f.handler is not None:
        where.add("api_jobs_when_handler", handler=f.handler)
    if f.created_after is not None:
        where.add("api_jobs_when_created_after", created_after=f.created_after)
    if f.created_before is not None:
        where.add("api_jobs_when_created_before", created_before=f.created_before)
    if f.batch_id is not None:
        where.add("api_jobs_when_batch", batch_id=f.batch_id)
    if payload and f.payload_match is not None:
        where.add("api_jobs_when_payload", payload_match=f.payload_match)
    if f.error_text:
        where.add("api_jobs_when_error", error_text=f.error_text)
    if f.text:
        as_id = int(f.text) if f.text.isdigit() and len(f.text) <= _MAX_ID_DIGITS else None
        where.add("api_jobs_when_text", text_id=as_id, text_like=f"%{_like_escape(f.text)}%")
    return where


async def list_jobs(
    conn: Conn, project_id: UUID, f: JobFilter, *, limit: int, before_id: int | None
) -> list[JobPublic]:
    """Newest first; the keyset is the id (`before_id` = the last id of the previous page)."""
    where = filter_fragments(f, payload=False)
    if before_id is not None:
        where.add("api_jobs_after", before_id=before_id)
    if f.payload_match is not None:
        q = where.bind(
            "api_jobs_list_by_payload",
            project_id=project_id,
            limit=limit,
            payload_match=f.payload_match,
        )
    else:
        q = where.bind("api_jobs_list", project_id=project_id, limit=limit)
    return [JobPublic.model_validate(dict(r)) for r in await q.fetch(conn)]


async def get_job(conn: Conn, project_id: UUID, job_id: int) -> JobPublic:
    q = bind("api_jobs_list", "api_jobs_when_id", project_id=project_id, job_id=job_id, limit=1)
    row = await q.fetchrow(conn)
    if row is None:
        raise JobNotFoundError(f"no job {job_id} in this project")
    return JobPublic.model_validate(dict(row))


async def get_job_detail(conn: Conn, project_id: UUID, job_id: int) -> JobDetail:
    q = bind("api_jobs_detail", project_id=project_id, job_id=job_id)
    row = await q.fetchrow(conn)
    if row is None:
        raise JobNotFoundError(f"no job {job_id} in this project")
    e = bind("api_jobs_executions", project_id=project_id, job_id=job_id)
    executions = await e.fetch(conn)
    g = bind("api_job_logs_latest", project_id=project_id, job_id=job_id, limit=DETAIL_LOG_LINES)
    logs = await g.fetch(conn)
    data = dict(row)
    payload = data["payload"]
    data["payload_keys"] = sorted(payload) if isinstance(payload, dict) else None
    data["depends_on"] = list(data["depends_on"])
    data["executions"] = [_execution(x) for x in executions]
    data["logs"] = [_log(entry) for entry in logs]
    return JobDetail.model_validate(data)


async def explain_job(
    conn: Conn, project_id: UUID, job_id: int, *, dead_after_ms: int
) -> JobExplanation:
    """Why the job is not running: the claim's rules (domain.flow.explain) on its facts. A
    worker counts as live while it is active and has beaten within `dead_after_ms`."""
    q = bind("api_jobs_explain", project_id=project_id, job_id=job_id, dead_after_ms=dead_after_ms)
    row = await q.fetchrow(conn)
    if row is None:
        raise JobNotFoundError(f"no job {job_id} in this project")
    data = dict(row)
    now: datetime = data.pop("read_at")
    by_project = data["in_flight_by_project"]
    facts = ExplainFacts(
        **{name: data[name] for name in _FACT_COLUMNS},
        status=JobStatus(data["status"]),
        now=now,
        waiting_on=list(data["waiting_on"]),
        queue_holders=list(data["queue_holders"]),
        key_holders=list(data["key_holders"]),
        in_flight_by_project=json.loads(by_project) if isinstance(by_project, str) else by_project,
    )
    return JobExplanation(
        job_id=job_id,
        status=facts.status,
        checked_at=now,
        blockers=[JobBlocker(code=f.code, message=f.message, data=f.data) for f in explain(facts)],
    )


#: Columns of api_jobs_explain passed to ExplainFacts as they are.
_FACT_COLUMNS = (
    "run_at",
    "handler",
    "concurrency_key",
    "is_paused",
    "concurrency_limit",
    "key_concurrency_limit",
    "rate_limit_count",
    "rate_limit_period_ms",
    "rate_limit_per_key",
    "weight",
    "queue_leased",
    "key_leased",
    "rate_used",
    "rate_next_at",
    "ahead",
    "live_workers",
    "workers_with_handler",
    "live_capacity",
)


async def list_job_logs(
    conn: Conn, project_id: UUID, job_id: int, *, limit: int, after_id: int | None
) -> list[JobLogPublic]:
    """Oldest first; the keyset is the log line id. 404 unless the job is the project's."""
    await get_job(conn, project_id, job_id)
    where = Fragments()
    if after_id is not None:
        where.add("api_job_logs_after", after_id=after_id)
    q = where.bind("api_job_logs_list", project_id=project_id, job_id=job_id, limit=limit)
    return [_log(r) for r in await q.fetch(conn)]


def _execution(row: asyncpg.Record) -> ExecutionPublic:
    data = dict(row)
    if data["duration_ms"] is not None:
        data["duration_ms"] = round(float(data["duration_ms"]), 3)
    return ExecutionPublic.model_validate(data)


def _log(row: asyncpg.Record) -> JobLogPublic:
    data = dict(row)
    fields = data["fields"]
    data["fields"] = fields if isinstance(fields, dict) else {"value": json.dumps(fields)}
    return JobLogPublic.model_validate(data)
