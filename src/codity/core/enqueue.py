"""Enqueue: single and bulk, immediate or delayed, idempotent, with dependencies.

The logic is written once, as a *plan* (`_plan`): a generator that yields named statements and
receives their rows. `core/drivers.py` runs it on whatever connection the caller holds —
asyncpg, psycopg 3 (async or sync), or an SQLAlchemy session — so validation, defaults,
idempotency and dependencies behave identically on every driver, and the SQL is the same text.

Everything runs on the caller's connection: called inside the caller's open transaction the
jobs become part of it (they exist if and only if the caller's own writes commit), and the
NOTIFY that wakes idle workers is delivered at that commit, not before.

Unique jobs (`unique_for_s`): the keys are locked (a transaction-scoped advisory lock per queue
and key, taken in one order), then looked up in a new statement, whose snapshot therefore sees
every job a concurrent enqueuer of the same key committed; only the jobs with no recent match
are inserted. docs/CONCURRENCY.md, "Unique jobs", says how this differs from idempotency keys.

Speed (docs/DESIGN_DECISIONS.md, "Bulk enqueue"): jobs are validated and their payloads
JSON-encoded once, in one pass; every INSERT_CHUNK jobs go to the server as one `unnest`
INSERT whose reply is a single row of arrays; a bulk enqueue split into several statements
runs in one transaction (all or nothing) and asks for one NOTIFY, in its last statement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Final
from uuid import UUID

import asyncpg

from codity.core.drivers import (
    RECEIVE,
    Plan,
    Query,
    Row,
    Send,
    async_driver,
    run_async,
    run_sync,
    sync_driver,
)
from codity.core.queues import QueueInfo
from codity.core.validation import (
    MAX_ATTEMPTS_LIMIT,
    check_flow_key,
    check_handler,
    check_idempotency_key,
    check_positive,
    check_priority,
    check_trace_parent,
    check_unique,
    check_when,
    encode_payload,
)
from codity.db.queries import sql
from codity.domain.errors import QueueNotFoundError, ValidationError
from codity.domain.flow import default_unique_key
from codity.domain.states import JobStatus
from codity.tracing import current_traceparent

#: LISTEN on this channel to be woken when a queue gets claimable jobs; the payload is the
#: queue id as text.
NOTIFY_CHANNEL: Final = "codity_jobs"

#: Jobs per INSERT statement. Larger chunks cut round trips but not server work; 5,000 keeps
#: one statement's arrays (and the server's memory for them) small. See DESIGN_DECISIONS.md.
INSERT_CHUNK: Final = 5000


#: Called with the number of jobs just written, chunk by chunk.
Progress = Callable[[int], None]


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
    #: W3C traceparent of the enqueuing span; None = the caller's current span, if traced.
    trace_parent: str | None = None
    #: Jobs sharing a key share their queue's key_concurrency_limit (and per-key rate limit).
    concurrency_key: str | None = None
    #: Unique jobs: return a job of this queue with the same unique_key created less than
    #: unique_for_s ago and in one of unique_states (default: not finished) instead of
    #: making a new one. unique_key defaults to a hash of handler + payload.
    unique_for_s: float | None = None
    unique_key: str | None = None
    unique_states: Sequence[JobStatus | str] | None = None


@dataclass(frozen=True)
class QueueRef:
    """A queue named within a project (id, slug or "org/project"); project None = the only
    queue of that name in the database (ambiguity is refused)."""

    name: str
    project: str | None = None


@dataclass(frozen=True)
class EnqueuedJob:
    id: int
    status: JobStatus
    created: bool  # False when an idempotency key or a unique key matched an existing job


@dataclass(frozen=True)
class _QueueDefaults:
    info: QueueInfo
    policy_max_attempts: int | None


@dataclass(frozen=True)
class _Unique:
    """A unique enqueue's key, window and states (not stored: only the key is)."""

    key: str
    for_ms: float
    states: tuple[JobStatus, ...]


@dataclass
class _Columns:
    """Validated jobs as the column arrays `insert_jobs` takes."""

    handler: list[str]
    payload: list[str]  # JSON text, encoded once
    priority: list[int]
    run_at: list[datetime | None]
    delay_ms: list[float | None]
    idempotency_key: list[str | None]
    batch_id: list[UUID | None]
    timeout_ms: list[int | None]
    #: None: the queue's default, filled in by insert_jobs (see _plan's single statement)
    max_attempts: list[int | None]
    retry_policy_id: list[UUID | None]
    pending: list[int]
    schedule_id: list[UUID | None]
    trace_parent: list[str | None]
    concurrency_key: list[str | None]
    unique_key: list[str | None]
    depends_on: list[tuple[int, ...]]
    unique: list[_Unique | None]

    @property
    def size(self) -> int:
        return len(self.handler)

    def insert_query(self, queue_id: UUID, *, notify: bool, project_id: UUID | None) -> Query:
        """The statement that writes these rows: `insert_job` for one job (every column a
        scalar: a single enqueue is most of them, and the arrays' machinery cost it more than
        its row), `insert_jobs` for more. Both answer in the same columns."""
        if self.size == 1:
            return Query(
                "insert_job",
                (
                    queue_id,
                    self.handler[0],
                    self.payload[0],
                    self.priority[0],
                    self.run_at[0],
                    self.delay_ms[0],
                    self.idempotency_key[0],
                    self.batch_id[0],
                    self.timeout_ms[0],
                    self.max_attempts[0],
                    self.retry_policy_id[0],
                    self.pending[0],
                    self.schedule_id[0],
                    notify,
                    self.trace_parent[0],
                    self.concurrency_key[0],
                    self.unique_key[0],
                    project_id,
                ),
                ("insert_job_first_key_wins",) if self.idempotency_key[0] is not None else (),
            )
        keyed = any(k is not None for k in self.idempotency_key)
        return Query(
            "insert_jobs",
            self._insert_jobs_args(queue_id, notify, project_id, keyed),
            ("insert_jobs_first_key_wins",) if keyed else (),
        )

    def _insert_jobs_args(
        self, queue_id: UUID, notify: bool, project_id: UUID | None, keyed: bool
    ) -> tuple[Any, ...]:
        return (
            queue_id,
            _uniform(self.handler),
            _uniform(self.payload),
            _uniform(self.priority),
            _uniform(self.run_at),
            _uniform(self.delay_ms),
            _uniform(self.idempotency_key),
            _uniform(self.batch_id),
            _uniform(self.timeout_ms),
            _uniform(self.max_attempts),
            _uniform(self.retry_policy_id),
            _uniform(self.pending),
            _uniform(self.schedule_id),
            notify,
            self.size,
            keyed,
            _uniform(self.trace_parent),
            _uniform(self.concurrency_key),
            _uniform(self.unique_key),
            project_id,
        )

    def chunk(self, start: int, stop: int) -> _Columns:
        return _Columns(**{f.name: getattr(self, f.name)[start:stop] for f in fields(self)})

    def select(self, rows: Sequence[int]) -> _Columns:
        return _Columns(**{f.name: [getattr(self, f.name)[i] for i in rows] for f in fields(self)})


def _uniform(column: list[Any]) -> list[Any]:
    """A column holding one value throughout is sent as that one value (see insert_jobs)."""
    first = column[0]
    return [first] if column.count(first) == len(column) else column


def _check_depends_on(depends_on: Sequence[int]) -> tuple[int, ...]:
    ids: list[int] = []
    for dep in depends_on:
        if isinstance(dep, bool) or not isinstance(dep, int) or dep <= 0:
            raise ValidationError(f"depends_on must hold job ids (positive integers), got {dep!r}")
        ids.append(dep)
    return tuple(dict.fromkeys(ids))


def _check_shape(jobs: Sequence[NewJob]) -> None:
    for job in jobs:
        if not isinstance(job, NewJob):
            raise ValidationError("each job must be a NewJob")


def _options(job: NewJob) -> tuple[Any, ...]:
    """What a job sets besides its payload, with the types of the fields a bool could sneak
    into (True == 1): two jobs with equal options validate the same."""
    return (
        job.handler,
        job.priority,
        type(job.priority),
        job.run_at,
        job.delay_s,
        type(job.delay_s),
        job.idempotency_key,
        job.batch_id,
        job.timeout_ms,
        type(job.timeout_ms),
        job.max_attempts,
        type(job.max_attempts),
        job.retry_policy_id,
        job.trace_parent,
        job.concurrency_key,
        job.unique_for_s,
        type(job.unique_for_s),
        job.unique_key,
        None if job.unique_states is None else tuple(job.unique_states),
    )


def _validate_options(
    job: NewJob,
    queue_attempts: int | None,
    queue_timeout: int | None,
    policies: dict[UUID, int],
    trace_parent: str | None = None,
) -> tuple[Any, ...]:
    """The job's columns other than payload, pending and schedule, in `_Columns` order."""
    run_at, delay_ms = check_when(job.run_at, job.delay_s)
    max_attempts = check_positive("max_attempts", job.max_attempts, upper=MAX_ATTEMPTS_LIMIT)
    if max_attempts is None:
        max_attempts = (
            policies[job.retry_policy_id] if job.retry_policy_id is not None else queue_attempts
        )
    timeout_ms = check_positive("timeout_ms", job.timeout_ms, upper=2**31 - 1)
    unique = check_unique(job.unique_for_s, job.unique_key, job.unique_states)
    return (
        check_handler(job.handler),
        check_priority(job.priority),
        run_at,
        delay_ms,
        check_idempotency_key(job.idempotency_key),
        job.batch_id,
        timeout_ms if timeout_ms is not None else queue_timeout,
        max_attempts,
        job.retry_policy_id,
        check_trace_parent(job.trace_parent) if job.trace_parent is not None else trace_parent,
        check_flow_key("concurrency_key", job.concurrency_key),
        unique,
    )


def check_new_job(job: NewJob) -> None:
    """The checks enqueue makes on a job that need no database (eager mode runs these)."""
    _check_shape([job])
    encode_payload(job.payload)
    policies = {job.retry_policy_id: 1} if job.retry_policy_id is not None else {}
    _validate_options(job, 1, None, policies)
    if job.depends_on:
        _check_depends_on(job.depends_on)


def _prepare(
    jobs: Sequence[NewJob],
    q: _QueueDefaults | None,
    policies: dict[UUID, int],
    schedule_ids: Sequence[UUID | None] | None,
    trace_parent: str | None = None,
) -> _Columns:
    """Validate and encode jobs into columns. Bulk enqueues mostly repeat one set of options
    with different payloads (and the CLI one payload too): each distinct run of options or
    payload is validated or encoded once, the rest is a comparison. `q` None: the queue was
    not read first; the queue's defaults are left for insert_jobs to fill in."""
    queue_attempts: int | None = None
    queue_timeout: int | None = None
    if q is not None:
        queue_attempts = (
            q.policy_max_attempts
            if q.policy_max_attempts is not None
            else q.info.default_max_attempts
        )
        queue_timeout = q.info.default_timeout_ms
    payloads: list[str] = []
    rows: list[tuple[Any, ...]] = []
    last_payload: Any = object()
    last_text = ""
    last_options: tuple[Any, ...] | None = None
    last_row: tuple[Any, ...] = ()
    for job in jobs:
        if job.payload is not last_payload:
            last_text = encode_payload(job.payload)
            last_payload = job.payload
        payloads.append(last_text)
        options = _options(job)
        if options != last_options:
            last_row = _validate_options(job, queue_attempts, queue_timeout, policies, trace_parent)
            last_options = options
        rows.append(last_row)
    (
        handler,
        priority,
        run_at,
        delay_ms,
        key,
        batch,
        timeout,
        attempts,
        policy,
        parent,
        concurrency_key,
        unique_window,
    ) = (list(column) for column in zip(*rows, strict=True))
    unique = [
        None if window is None else _unique(job, *window)
        for job, window in zip(jobs, unique_window, strict=True)
    ]
    n = len(rows)
    return _Columns(
        handler=handler,
        payload=payloads,
        priority=priority,
        run_at=run_at,
        delay_ms=delay_ms,
        idempotency_key=key,
        batch_id=batch,
        timeout_ms=timeout,
        max_attempts=attempts,
        retry_policy_id=policy,
        pending=[0] * n,
        schedule_id=list(schedule_ids) if schedule_ids is not None else [None] * n,
        trace_parent=parent,
        concurrency_key=concurrency_key,
        unique_key=[u.key if u is not None else None for u in unique],
        depends_on=[_check_depends_on(j.depends_on) if j.depends_on else () for j in jobs],
        unique=unique,
    )


def _unique(job: NewJob, for_ms: float, states: tuple[JobStatus, ...]) -> _Unique:
    key = job.unique_key
    if key is None:
        key = default_unique_key(job.handler, job.payload)
    return _Unique(key=key, for_ms=for_ms, states=states)


def _queue_plan(queue: UUID | QueueRef, project_id: UUID | None = None) -> Plan[_QueueDefaults]:
    """The queue's defaults; with `project_id`, another project's queue is not found (as one
    that does not exist)."""
    if isinstance(queue, QueueRef):
        rows = yield Query("queue_for_enqueue_by_name", (queue.project, queue.name))
        if len(rows) > 1:
            choices = ", ".join(r["project_label"] for r in rows)
            raise ValidationError(
                f"queue {queue.name!r} exists in several projects; name the project "
                f"(one of: {choices})",
                details={"queue": queue.name},
            )
        what = queue.name if queue.project is None else f"{queue.project}/{queue.name}"
    else:
        rows = yield Query("queue_for_enqueue", (queue,))
        what = str(queue)
    if not rows or (project_id is not None and rows[0]["project_id"] != project_id):
        raise QueueNotFoundError(f"no queue {what!r}", details={"queue": what})
    return _QueueDefaults(QueueInfo.from_row(rows[0]), rows[0]["policy_max_attempts"])


def _policies_plan(project_id: UUID, jobs: Sequence[NewJob]) -> Plan[dict[UUID, int]]:
    wanted = sorted({j.retry_policy_id for j in jobs if j.retry_policy_id is not None})
    if not wanted:
        return {}
    rows = yield Query("retry_policies_max_attempts", (wanted, project_id))
    found = {r["id"]: r["max_attempts"] for r in rows}
    missing = [str(p) for p in wanted if p not in found]
    if missing:
        raise ValidationError(
            f"unknown retry policy {', '.join(missing)}", details={"retry_policy_ids": missing}
        )
    return found


def _pending_plan(project_id: UUID, cols: _Columns) -> Plan[None]:
    """Lock the jobs depended on and set each row's pending count."""
    wanted = sorted({d for deps in cols.depends_on for d in deps})
    rows = yield Query("lock_dependencies", (wanted, project_id))
    status = {r["id"]: r["status"] for r in rows}
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
    cols.pending = [
        sum(1 for d in deps if status[d] != JobStatus.COMPLETED) for deps in cols.depends_on
    ]


def _insert_plan(
    queue_id: UUID,
    chunks: Iterator[tuple[_Columns, bool]],
    progress: Progress | None,
    project_id: UUID | None = None,
) -> Plan[list[EnqueuedJob]]:
    """INSERT chunk after chunk. Each chunk is sent before the next one is validated and
    encoded, so the client's work on chunk k+1 overlaps the server's on chunk k. A queue that
    does not exist inserts nothing (insert_jobs reads it) and raises QueueNotFoundError."""
    results: list[EnqueuedJob | None] = []
    keys: list[str | None] = []
    pending: tuple[_Columns, bool] | None = next(chunks)
    while pending is not None:
        cols, last = pending
        keys.extend(cols.idempotency_key)
        yield Send(cols.insert_query(queue_id, notify=last, project_id=project_id))
        pending = None if last else next(chunks)
        (row,) = yield RECEIVE
        if not row["queue_found"]:
            raise QueueNotFoundError(
                f"no queue {str(queue_id)!r}", details={"queue": str(queue_id)}
            )
        results.extend(_chunk_results(row))
        if progress is not None:
            progress(cols.size)
    missing = {keys[i] for i, r in enumerate(results) if r is None}
    if not missing:
        return [r for r in results if r is not None]
    # Idempotency-key repeats: the job made earlier in this call, else the one already stored.
    existing: dict[str, EnqueuedJob] = {}
    for key, made in zip(keys, results, strict=True):
        if made is not None and key is not None and key not in existing:
            existing[key] = EnqueuedJob(made.id, made.status, created=False)
    lookup = sorted(k for k in missing - existing.keys() if k is not None)
    if lookup:
        for rec in (yield Query("jobs_by_idempotency_key", (queue_id, lookup))):
            existing[rec["idempotency_key"]] = EnqueuedJob(
                rec["id"], JobStatus(rec["status"]), created=False
            )
    return [
        made if made is not None else existing[key]  # type: ignore[index]
        for key, made in zip(keys, results, strict=True)
    ]


def _chunk_results(row: Row) -> list[EnqueuedJob | None]:
    new_ids: list[int] = row["new_ids"]
    if row["inserted_ids"] is None:
        # No idempotency key and one status: every row was made, in that status.
        status = JobStatus(row["status"])
        return [EnqueuedJob(i, status, True) for i in new_ids]
    made = dict(zip(row["inserted_ids"], row["inserted_statuses"], strict=True))
    return [EnqueuedJob(i, JobStatus(made[i]), True) if i in made else None for i in new_ids]


def _bounds(n: int) -> list[tuple[int, int]]:
    return [(start, min(n, start + INSERT_CHUNK)) for start in range(0, n, INSERT_CHUNK)]


#: A match for row i of an enqueue: a job already stored, or the index of an earlier row of the
#: same call with the same unique key (it gets that row's job).
_Match = EnqueuedJob | int


def _unique_plan(queue_id: UUID, cols: _Columns) -> Plan[dict[int, _Match]]:
    """Lock the unique keys, then find each unique row's recent match.

    The lock statement and the lookup are two statements on purpose: the lookup's snapshot is
    taken after the locks are held, so it sees the job of any enqueuer that held one of them
    before us (it committed, then its lock was released). Keys are locked in one order (by
    their lock id) by every enqueuer, so two bulk enqueues cannot deadlock on them.
    """
    rows = [i for i, u in enumerate(cols.unique) if u is not None]
    wanted = [u for u in cols.unique if u is not None]
    (lock,) = yield Query("lock_unique_keys", (queue_id, sorted({u.key for u in wanted})))
    if lock["isolation"] != "read committed":
        raise ValidationError(
            "unique jobs need a READ COMMITTED transaction (PostgreSQL's default): under "
            f"{lock['isolation']} the lookup could not see a job another enqueue just committed"
        )
    matches = yield Query(
        "unique_matches",
        (
            queue_id,
            [u.key for u in wanted],
            [u.for_ms for u in wanted],
            [",".join(wanted_states) for wanted_states in (u.states for u in wanted)],
        ),
    )
    found: dict[int, _Match] = {
        rows[m["ord"] - 1]: EnqueuedJob(m["id"], JobStatus(m["status"]), created=False)
        for m in matches
    }
    first: dict[str, int] = {}
    for i, u in zip(rows, wanted, strict=True):
        if i in found:
            continue
        if u.key in first:
            found[i] = first[u.key]  # a repeat within this call: the call's first job of the key
        else:
            first[u.key] = i
    return found


def _plan(
    queue: UUID | QueueRef,
    jobs: Sequence[NewJob],
    schedule_ids: Sequence[UUID | None] | None,
    progress: Progress | None = None,
    project_id: UUID | None = None,
) -> Plan[list[EnqueuedJob]]:
    _check_shape(jobs)
    traced_by = current_traceparent()  # the caller's span (codity[otel]), once per call
    n = len(jobs)
    if isinstance(queue, UUID) and not any(
        j.depends_on or j.unique_for_s is not None or j.retry_policy_id is not None for j in jobs
    ):
        # The common case in one statement: insert_jobs reads the queue itself (its defaults,
        # and whether it exists), so no query goes before it — one round trip per job enqueued
        # alone. Dependencies, unique keys and a job's own retry policy need the queue's
        # project first (they are looked up within it).
        lazy = (
            (
                _prepare(
                    jobs[a:b], None, {}, schedule_ids[a:b] if schedule_ids else None, traced_by
                ),
                b == n,
            )
            for a, b in _bounds(n)
        )
        return (yield from _insert_plan(queue, lazy, progress, project_id))
    q = yield from _queue_plan(queue, project_id)
    policies = yield from _policies_plan(q.info.project_id, jobs)
    if not any(j.depends_on or j.unique_for_s is not None for j in jobs):
        lazy = (
            (
                _prepare(
                    jobs[a:b],
                    q,
                    policies,
                    schedule_ids[a:b] if schedule_ids else None,
                    traced_by,
                ),
                b == n,
            )
            for a, b in _bounds(n)
        )
        return (yield from _insert_plan(q.info.id, lazy, progress, project_id))
    # With dependencies every row's pending count comes from one locking read of all of them,
    # and unique rows are looked up before anything is inserted: everything is validated first.
    cols = _prepare(jobs, q, policies, schedule_ids, traced_by)
    if any(cols.depends_on):
        yield from _pending_plan(q.info.project_id, cols)
    matched: dict[int, _Match] = {}
    if any(u is not None for u in cols.unique):
        matched = yield from _unique_plan(q.info.id, cols)
    todo = [i for i in range(n) if i not in matched]
    made: list[EnqueuedJob] = []
    if todo:
        rest = cols if len(todo) == n else cols.select(todo)
        chunks = ((rest.chunk(a, b), b == len(todo)) for a, b in _bounds(len(todo)))
        made = yield from _insert_plan(q.info.id, chunks, progress, project_id)
    if matched and progress is not None:
        progress(len(matched))
    by_row: dict[int, EnqueuedJob] = dict(zip(todo, made, strict=True))
    for i, match in matched.items():
        if isinstance(match, int):
            earlier = by_row[match]
            match = EnqueuedJob(earlier.id, earlier.status, created=False)
        by_row[i] = match
    result = [by_row[i] for i in range(n)]
    dependants: list[int] = []
    depended: list[int] = []
    for deps, job in zip(cols.depends_on, result, strict=True):
        if job.created:
            dependants.extend([job.id] * len(deps))
            depended.extend(deps)
    if dependants:
        yield Query("insert_job_dependencies", (dependants, depended))
    return result


def _atomic(jobs: Sequence[NewJob]) -> bool:
    """Several statements that must commit together: dependencies (locks + rows), unique jobs
    (locks held until the insert commits) or more than one INSERT chunk. One plain job or chunk
    is one INSERT, atomic by itself."""
    return len(jobs) > INSERT_CHUNK or any(j.depends_on or j.unique_for_s is not None for j in jobs)


async def _enqueue_rows(
    conn: Any,
    queue_id: UUID | QueueRef,
    jobs: Sequence[NewJob],
    schedule_ids: Sequence[UUID | None] | None = None,
    progress: Progress | None = None,
    project_id: UUID | None = None,
) -> list[EnqueuedJob]:
    if not jobs:
        return []
    if isinstance(conn, asyncpg.Pool):
        # One connection for the whole plan: a pooled statement each would pay the pool's
        # acquire and its reset round trip per statement (two of each for a single job).
        async with conn.acquire() as held:
            return await _enqueue_rows(held, queue_id, jobs, schedule_ids, progress, project_id)
    driver = await async_driver(conn)
    plan = _plan(queue_id, jobs, schedule_ids, progress, project_id)
    return await run_async(driver, plan, atomic=_atomic(jobs))


async def enqueue(
    conn: Any, queue_id: UUID | QueueRef, job: NewJob, *, project_id: UUID | None = None
) -> EnqueuedJob:
    """Enqueue one job on `conn`: an asyncpg Connection or Pool, a psycopg AsyncConnection, or
    an SQLAlchemy AsyncSession / AsyncConnection. Inside the caller's open transaction the job
    commits or rolls back with it. With `project_id` the queue must be that project's (the
    statement checks it): another tenant's queue id is a QueueNotFoundError.

    Raises QueueNotFoundError, ValidationError, PayloadTooLargeError before writing anything.
    """
    return (await _enqueue_rows(conn, queue_id, [job], project_id=project_id))[0]


async def enqueue_many(
    conn: Any,
    queue_id: UUID | QueueRef,
    jobs: Sequence[NewJob],
    *,
    progress: Progress | None = None,
    project_id: UUID | None = None,
) -> list[EnqueuedJob]:
    """Enqueue many jobs; results are in input order. All or nothing, on bad input and on a
    failure part-way (several statements run in one transaction, a savepoint in the caller's).
    `progress(n)` is called as each chunk of n jobs is written (for a progress bar).
    `project_id`: as for `enqueue`."""
    return await _enqueue_rows(conn, queue_id, list(jobs), progress=progress, project_id=project_id)


def enqueue_sync(conn: Any, queue_id: UUID | QueueRef, job: NewJob) -> EnqueuedJob:
    """`enqueue` for sync code: a psycopg Connection or an SQLAlchemy Session / Connection."""
    return enqueue_many_sync(conn, queue_id, [job])[0]


def enqueue_many_sync(
    conn: Any, queue_id: UUID | QueueRef, jobs: Sequence[NewJob]
) -> list[EnqueuedJob]:
    jobs = list(jobs)
    if not jobs:
        return []
    return run_sync(sync_driver(conn), _plan(queue_id, jobs, None), atomic=_atomic(jobs))


async def notify_queues(conn: Any, queue_ids: Sequence[UUID]) -> None:
    """Wake workers listening on NOTIFY_CHANNEL for these queues."""
    if queue_ids:
        await conn.execute(sql("notify_queues"), list(queue_ids))
