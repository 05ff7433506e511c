"""Jobs: filtered keyset lists, the detail view (executions, logs, payload) and log pages."""

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
    JobDetail,
    JobLogPublic,
    JobPublic,
)
from codity.core import Conn
from codity.domain.errors import JobNotFoundError
from codity.domain.states import JobStatus

#: Log lines the detail view carries; the rest is one `GET .../logs` away.
DETAIL_LOG_LINES = 100

_PUBLIC_COLUMNS = """
j.id, j.queue_id, q.name AS queue_name, j.handler, j.status::text AS status, j.priority,
j.attempt, j.max_attempts, j.run_at, j.created_at, j.updated_at, j.claimed_at, j.started_at,
j.finished_at, j.idempotency_key, j.batch_id, j.schedule_id, j.worker_id, j.timeout_ms,
j.progress, j.last_error, j.cancel_requested_at
"""


@dataclass(frozen=True)
class JobFilter:
    queue_id: UUID | None = None
    statuses: Sequence[JobStatus] = ()
    handler: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    batch_id: UUID | None = None
    text: str | None = None


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _where(project_id: UUID, f: JobFilter, before_id: int | None) -> tuple[str, list[Any]]:
    """The WHERE clause and its parameters: values are always bound, never spliced."""
    params: list[Any] = [project_id]
    clauses = ["q.project_id = $1"]

    def bind(value: Any) -> str:
        params.append(value)
        return f"${len(params)}"

    if f.queue_id is not None:
        clauses.append(f"j.queue_id = {bind(f.queue_id)}")
    if f.statuses:
        clauses.append(f"j.status = ANY({bind([s.value for s in f.statuses])}::job_status[])")
    if f.handler is not None:
        clauses.append(f"j.handler = {bind(f.handler)}")
    if f.created_after is not None:
        clauses.append(f"j.created_at >= {bind(f.created_after)}")
    if f.created_before is not None:
        clauses.append(f"j.created_at < {bind(f.created_before)}")
    if f.batch_id is not None:
        clauses.append(f"j.batch_id = {bind(f.batch_id)}")
    if f.text:
        # Text search: an exact job id, or a substring of the idempotency key.
        like = bind(f"%{_like_escape(f.text)}%")
        as_id = int(f.text) if f.text.isdigit() and len(f.text) <= 18 else None
        clauses.append(f"(j.id = {bind(as_id)}::bigint OR j.idempotency_key ILIKE {like})")
    if before_id is not None:
        clauses.append(f"j.id < {bind(before_id)}")
    return " AND ".join(clauses), params


async def list_jobs(
    conn: Conn, project_id: UUID, f: JobFilter, *, limit: int, before_id: int | None
) -> list[JobPublic]:
    """Newest first; the keyset is the id (`before_id` = the last id of the previous page)."""
    where, params = _where(project_id, f, before_id)
    params.append(limit)
    rows = await conn.fetch(
        f"SELECT {_PUBLIC_COLUMNS} FROM jobs j JOIN queues q ON q.id = j.queue_id "
        f"WHERE {where} ORDER BY j.id DESC LIMIT ${len(params)}",
        *params,
    )
    return [JobPublic.model_validate(dict(r)) for r in rows]


async def get_job(conn: Conn, project_id: UUID, job_id: int) -> JobPublic:
    row = await conn.fetchrow(
        f"SELECT {_PUBLIC_COLUMNS} FROM jobs j JOIN queues q ON q.id = j.queue_id "
        "WHERE q.project_id = $1 AND j.id = $2",
        project_id,
        job_id,
    )
    if row is None:
        raise JobNotFoundError(f"no job {job_id} in this project")
    return JobPublic.model_validate(dict(row))


async def get_job_detail(conn: Conn, project_id: UUID, job_id: int) -> JobDetail:
    row = await conn.fetchrow(
        f"""SELECT {_PUBLIC_COLUMNS}, j.payload, j.result, j.progress_message, j.execution_seq,
                   j.lock_expires_at, j.retry_policy_id, j.pending_dependencies,
                   octet_length(j.payload::text) AS payload_size,
                   ARRAY(SELECT d.depends_on_id FROM job_dependencies d
                         WHERE d.job_id = j.id ORDER BY d.depends_on_id) AS depends_on
            FROM jobs j JOIN queues q ON q.id = j.queue_id
            WHERE q.project_id = $1 AND j.id = $2""",
        project_id,
        job_id,
    )
    if row is None:
        raise JobNotFoundError(f"no job {job_id} in this project")
    executions = await conn.fetch(
        """SELECT execution_seq, attempt, status::text AS status, worker_id, claimed_at,
                  started_at, finished_at, error, traceback,
                  extract(epoch FROM finished_at - started_at) * 1000 AS duration_ms
           FROM job_executions WHERE job_id = $1 ORDER BY execution_seq""",
        job_id,
    )
    logs = await conn.fetch(
        """SELECT * FROM (SELECT id, execution_seq, level, message, fields, created_at
                          FROM job_logs WHERE job_id = $1 ORDER BY id DESC LIMIT $2) l
           ORDER BY id""",
        job_id,
        DETAIL_LOG_LINES,
    )
    data = dict(row)
    payload = data["payload"]
    data["payload_keys"] = sorted(payload) if isinstance(payload, dict) else None
    data["depends_on"] = list(data["depends_on"])
    data["executions"] = [_execution(e) for e in executions]
    data["logs"] = [_log(entry) for entry in logs]
    return JobDetail.model_validate(data)


async def list_job_logs(
    conn: Conn, project_id: UUID, job_id: int, *, limit: int, after_id: int | None
) -> list[JobLogPublic]:
    """Oldest first; the keyset is the log line id."""
    await get_job(conn, project_id, job_id)  # 404 unless the job is in this project
    rows = await conn.fetch(
        """SELECT id, execution_seq, level, message, fields, created_at FROM job_logs
           WHERE job_id = $1 AND ($2::bigint IS NULL OR id > $2) ORDER BY id LIMIT $3""",
        job_id,
        after_id,
        limit,
    )
    return [_log(r) for r in rows]


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
