"""`codity enqueue QUEUE HANDLER`: put jobs on a queue from a shell or a script."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Annotated, Any
from uuid import UUID

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from codity import core
from codity.cli._common import console, database_url, fail, friendly_errors, run
from codity.db.pool import connect
from codity.domain.errors import NotFoundError, QueueNotFoundError, ValidationError

#: Up to this many jobs the ids are printed one per line; above it, a summary.
PRINT_IDS_UP_TO = 20
#: From this many jobs on, a progress bar is shown (on a terminal: rich hides it otherwise).
PROGRESS_FROM = 2 * core.INSERT_CHUNK

# Read-only lookups the CLI needs to turn names into ids (no job state is touched here).
_PROJECTS_BY_SLUG = """
SELECT p.id, o.slug || '/' || p.slug AS label FROM projects p
JOIN organizations o ON o.id = p.org_id
WHERE p.slug = $1 OR o.slug || '/' || p.slug = $1
ORDER BY label
"""
_PROJECTS_WITH_QUEUE = """
SELECT p.id, o.slug || '/' || p.slug AS label FROM queues q
JOIN projects p ON p.id = q.project_id JOIN organizations o ON o.id = p.org_id
WHERE q.name = $1
ORDER BY label
"""


def _only(rows: list[Any], *, none: Exception, what: str) -> UUID:
    if not rows:
        raise none
    if len(rows) > 1:
        choices = ", ".join(r["label"] for r in rows)
        raise ValidationError(f"{what} is ambiguous; pass --project with one of: {choices}")
    project_id: UUID = rows[0]["id"]
    return project_id


async def find_project(conn: Any, queue: str, project: str | None) -> UUID:
    if project is not None:
        rows = await conn.fetch(_PROJECTS_BY_SLUG, project)
        return _only(
            rows, none=NotFoundError(f"no project {project!r}"), what=f"project {project!r}"
        )
    rows = await conn.fetch(_PROJECTS_WITH_QUEUE, queue)
    return _only(
        rows, none=QueueNotFoundError(f"no queue named {queue!r}"), what=f"queue {queue!r}"
    )


@dataclass(frozen=True)
class Enqueued:
    ids: list[int]
    seconds: float

    @property
    def jobs_per_s(self) -> float:
        return len(self.ids) / self.seconds if self.seconds > 0 else float("inf")


async def enqueue_jobs(
    url: str, queue: str, project: str | None, job: core.NewJob, count: int
) -> Enqueued:
    conn = await connect(url, application_name="codity-cli")
    try:
        project_id = await find_project(conn, queue, project)
        info = await core.resolve_queue(conn, project_id, queue)
        progress = Progress(
            TextColumn("enqueueing"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=count < PROGRESS_FROM,
            transient=True,
        )
        # One call: all COUNT jobs or none (enqueue_many runs its chunks in one transaction, so
        # an error in chunk 7 leaves nothing behind), and workers are notified once, at commit.
        with progress:
            task = progress.add_task("enqueue", total=count)
            started = time.perf_counter()
            enqueued = await core.enqueue_many(
                conn, info.id, [job] * count, progress=lambda n: progress.advance(task, n)
            )
            seconds = time.perf_counter() - started
        return Enqueued([e.id for e in enqueued], seconds)
    finally:
        await conn.close()


@friendly_errors
def enqueue_command(
    queue: Annotated[str, typer.Argument(help="Queue name (or id).")],
    handler: Annotated[str, typer.Argument(help="Handler name, e.g. email.send.")],
    project: Annotated[
        str | None, typer.Option("--project", "-p", help="Project slug (or org/project).")
    ] = None,
    payload: Annotated[str, typer.Option("--payload", help="The payload, as JSON.")] = "{}",
    count: Annotated[int, typer.Option("--count", "-n", min=1, help="How many jobs.")] = 1,
    delay: Annotated[
        float | None, typer.Option("--delay", min=0, help="Run this many seconds from now.")
    ] = None,
    priority: Annotated[int, typer.Option("--priority", help="Higher runs first.")] = 0,
    concurrency_key: Annotated[
        str | None,
        typer.Option(
            "--concurrency-key",
            help="Jobs sharing a key share the queue's key_concurrency_limit (and per-key rate).",
        ),
    ] = None,
    unique_for: Annotated[
        float | None,
        typer.Option(
            "--unique-for",
            min=0.001,
            help="Seconds: return an unfinished job with the same handler and payload enqueued "
            "this recently instead of a new one.",
        ),
    ] = None,
) -> None:
    """Enqueue COUNT jobs of HANDLER on QUEUE; prints the job ids (a summary for many)."""
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        fail(f"--payload is not valid JSON: {exc}")
    job = core.NewJob(
        handler=handler,
        payload=data,
        priority=priority,
        delay_s=delay,
        concurrency_key=concurrency_key,
        unique_for_s=unique_for,
    )
    with database_url() as url:
        done = run(enqueue_jobs(url, queue, project, job, count))
    ids = done.ids
    if len(ids) <= PRINT_IDS_UP_TO:
        for job_id in ids:
            console.print(job_id, highlight=False)
    else:
        console.print(
            f"enqueued {len(ids)} jobs on {queue} (ids {min(ids)}..{max(ids)}) "
            f"in {done.seconds:.2f} s ({done.jobs_per_s:,.0f} jobs/s)",
            highlight=False,
        )
