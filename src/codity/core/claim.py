"""Claim: hand queued jobs to a worker, never the same job to two workers.

The statement is `claim_jobs` in db/sql/claim.sql: ONE statement (one round trip) for every
queue a worker serves, best queue first, never more than `limit` jobs in total. Pauses and
concurrency limits are read inside it (no query before it); FOR UPDATE SKIP LOCKED means no job
is handed out twice; a limited queue's row is locked and its leased jobs counted with a fresh
snapshot, so claimers of that queue take turns and the limit is never over-admitted.

Flow control is read inside the claim too (docs/CONCURRENCY.md): queues with a key limit or a
rate limit are served by a second statement, `claim_jobs_flow`, with fair shares between projects
when asked; `Claimer` (one per worker) picks which statement runs first. A rate limit that held a
claim back says when the next start frees up (`ClaimRound.retry_in_ms`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final
from uuid import UUID

import asyncpg

from codity.core.connection import Conn
from codity.core.epoch import from_epoch_us
from codity.core.fence import Fence
from codity.db.queries import sql
from codity.domain.errors import ValidationError


@dataclass(slots=True)
class ClaimedJob:
    """A job the claim leased to a worker. Treat it as read-only; not `frozen` because a frozen
    dataclass sets each field through object.__setattr__ (made for every claimed job: 3x
    slower)."""

    id: int
    queue_id: UUID
    handler: str
    payload: Any
    attempt: int
    max_attempts: int
    execution_seq: int
    timeout_ms: int | None
    priority: int
    worker_id: UUID  # who holds the lease: part of the fence
    #: W3C traceparent of the enqueuing span, when it was traced (the attempt's span links it).
    trace_parent: str | None = None
    #: When it became due, in whole microseconds since the Unix epoch: with priority and id, its
    #: place in the claim order (see ClaimCursor). An integer because the claim decodes one per
    #: job and a datetime costs a microsecond to build; `run_at` makes one when asked.
    run_at_us: int | None = None

    #: (job id, worker id, execution_seq): built once, every later write names it.
    fence: Fence = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.fence = Fence(self.id, self.worker_id, self.execution_seq)

    @property
    def run_at(self) -> datetime | None:
        """When it became due."""
        return None if self.run_at_us is None else from_epoch_us(self.run_at_us)


def _job(row: Any, worker_id: UUID) -> ClaimedJob:
    # Positional, in the order of the RETURNING clauses' first columns (claim.sql).
    return ClaimedJob(
        row[0],  # id
        row[1],  # queue_id
        row[2],  # handler
        row[3],  # payload
        row[4],  # attempt
        row[5],  # max_attempts
        row[6],  # execution_seq
        row[7],  # timeout_ms
        row[8],  # priority
        worker_id,
        row[11],  # trace_parent
        row[9],  # run_at_us
    )


def _claim_order(row: Any) -> tuple[int, int, int, int]:
    # Best queue first, then the claim index's own order (priority DESC, run_at, id).
    return (row[10], -row[8], row[9], row[0])  # pos, priority, run_at_us, id


@dataclass(frozen=True, slots=True)
class ClaimCursor:
    """Where a claimer's last claim from a queue ended, in the claim index's order.

    The next claim of that queue starts after it at this priority (higher priorities are still
    read from the front): the index entries of jobs it already claimed are skipped instead of
    stepped over. While a long transaction pins the xmin horizon those entries cannot be
    vacuumed and a claim from the front of the index would visit every one of them. A job that
    comes back with an older key (released, reaped, promoted) is found by the next claim made
    without a cursor, which the claimer makes every so often (worker.producer). A claim that
    gives no job of a queue moves no cursor by itself: `advance_cursors` moves it to just behind
    the claim's clock when the claim says the queue ran dry.
    """

    priority: int
    run_at: datetime
    id: int

    @classmethod
    def after(cls, job: ClaimedJob) -> ClaimCursor | None:
        run_at = job.run_at
        return None if run_at is None else cls(job.priority, run_at, job.id)


@dataclass(frozen=True)
class ClaimRound:
    jobs: list[ClaimedJob]
    #: A rate-limited queue had fewer starts left than asked for: the next one frees up in this
    #: many milliseconds. None when no rate limit held the claim back.
    retry_in_ms: float | None = None
    #: How many of the queues have flow control (a key or rate limit), served by
    #: claim_jobs_flow; 0 when the plain claim had none to leave out.
    flow_queues: int = 0
    #: Queues the plain claim read to the end with room to spare and took no job from: nothing
    #: was queued after their cursors (claim.sql's report row). Empty when it filled the claim.
    ran_dry: tuple[UUID, ...] = ()
    #: The database's clock when the plain claim ran (its now()); None from claim_jobs_flow.
    scanned_at: datetime | None = None
    #: The plain claim took fewer jobs than each queue's quota from every queue: nothing is
    #: left that a slot freed in the worker could claim, until the next enqueue. False from
    #: claim_jobs_flow, and whenever a queue may still hold claimable jobs.
    drained: bool = False


Cursors = Mapping[UUID, ClaimCursor]

#: How far behind the claim's clock a queue that ran dry gets its cursor. A job enqueued by a
#: transaction that began before then and committed after the claim's snapshot is behind it
#: (found by the next claim without cursors); every job enqueued later is after it.
DRY_CURSOR_LAG: Final = timedelta(milliseconds=500)


def advance_cursors(cursors: MutableMapping[UUID, ClaimCursor], claimed: ClaimRound) -> None:
    """Move each queue's cursor to where this round's claim of it ended.

    A queue that gave jobs: after its last one (in claim order). A queue that ran dry: to
    DRY_CURSOR_LAG behind the claim's clock, at its cursor's priority (0 without one), unless
    its cursor is already later. Without the second rule a claimer that loses every race for a
    queue keeps its old cursor, and each of its claims steps over the index entries of every
    job the others took since (under a held snapshot they cannot be vacuumed): one worker's
    claims grew from 0.1 to 4.8 s in `codity bench xmin`. A queue that gave nothing because it
    was full (its concurrency limit) or paused is not in `ran_dry`: its oldest jobs stay ahead.
    """
    jobs = claimed.jobs
    if len(jobs) > 1 and jobs[0].queue_id != jobs[-1].queue_id:  # several queues
        last = {job.queue_id: job for job in jobs}  # grouped by queue: the last of each
    else:
        last = {jobs[-1].queue_id: jobs[-1]} if jobs else {}
    for queue_id, job in last.items():
        cursor = ClaimCursor.after(job)
        if cursor is not None:
            cursors[queue_id] = cursor
    if claimed.scanned_at is None:
        return
    behind = claimed.scanned_at - DRY_CURSOR_LAG
    for queue_id in claimed.ran_dry:
        previous = cursors.get(queue_id)
        if queue_id in last or (previous is not None and previous.run_at >= behind):
            continue
        cursors[queue_id] = ClaimCursor(previous.priority if previous else 0, behind, 0)


def _cursor_arrays(ids: list[UUID], cursors: Cursors | None) -> list[list[Any] | None]:
    if not cursors:
        return [None, None, None]
    at = [cursors.get(q) for q in ids]
    return [
        [c.priority if c else None for c in at],
        [c.run_at if c else None for c in at],
        [c.id if c else None for c in at],
    ]


async def _run(conn: Conn, statement: str, worker_id: UUID, args: list[Any]) -> ClaimRound:
    rows = await conn.fetch(sql(statement), *args)
    jobs = [r for r in rows if r[0] is not None]
    claimed = [_job(r, worker_id) for r in sorted(jobs, key=_claim_order)]
    report = next((r for r in rows if r[0] is None), None)  # the report row (see claim.sql)
    if report is None:  # claim_jobs_flow with no queue that has flow control
        return ClaimRound(claimed)
    quotas = report.get("quotas")
    if quotas is None:  # claim_jobs_flow says it itself
        ran_dry, drained = tuple(report.get("ran_dry") or ()), bool(report.get("drained"))
    else:
        ran_dry, drained = claim_report(claimed, args[3], report["quota_ids"], quotas)
    return ClaimRound(
        claimed,
        retry_in_ms=report.get("retry_in_ms"),
        flow_queues=report["flow_queues"] or 0,
        ran_dry=ran_dry,
        scanned_at=report.get("scanned_at"),
        drained=drained,
    )


def claim_report(
    claimed: list[ClaimedJob], limit: int, queue_ids: list[UUID], quotas: list[int]
) -> tuple[tuple[UUID, ...], bool]:
    """claim_jobs's ran_dry and drained (claim.sql, the report row) from each served queue's
    quota and the jobs claimed of it. A claim that filled `limit` says neither: a later queue
    may not have been read at all."""
    if len(claimed) >= limit:
        return (), False
    took = Counter(job.queue_id for job in claimed)
    ran_dry = tuple(q for q, n in zip(queue_ids, quotas, strict=True) if n > 0 and not took[q])
    drained = all(took[q] < n for q, n in zip(queue_ids, quotas, strict=True))
    return ran_dry, drained


def _returning(conn: Conn) -> Callable[[], Awaitable[Conn]]:
    async def get() -> Conn:
        return conn

    return get


class Claimer:
    """One worker's claims: one statement per round for all its queues.

    `claim_jobs` serves the queues without flow control and says how many it left out;
    `claim_jobs_flow` serves them all, flow control included (claim.sql). The Claimer goes to
    the flow statement first while its queues have flow control (or it shares between
    projects), to the plain one otherwise, and to the flow statement after a plain claim that
    left queues out and did not fill the claim. Both statements read the queues' settings
    themselves: the memory only decides which runs first, so a stale one costs a round trip,
    never a wrong claim.
    """

    def __init__(self, worker_id: UUID, lease_ms: int, *, flow_first: bool = False) -> None:
        if lease_ms <= 0:
            raise ValidationError(f"lease_ms must be positive, got {lease_ms}")
        self.worker_id = worker_id
        self.lease_ms = lease_ms
        self._flow_first = flow_first

    async def claim(
        self,
        conn: Conn,
        queue_ids: Sequence[UUID],
        limit: int,
        *,
        fair: bool = False,
        cursors: Cursors | None = None,
        flow_conn: Callable[[], Awaitable[Conn]] | None = None,
        held: Mapping[UUID, int] | None = None,
    ) -> ClaimRound:
        """Claim up to `limit` jobs (size it to the free slots). `fair` shares the claim
        between the queues' projects by weight (pass it when they span several projects);
        `cursors`: per queue, start after where the previous claim ended (ClaimCursor).
        `flow_conn`: where claim_jobs_flow runs (default `conn`); the worker gives it a
        connection that keeps the statement's plan (claim.sql says why that is safe).
        `held`: with `fair`, the jobs this claimer runs now per queue (absent: none). The
        shares then weigh them and what the other workers published at their last fair claim,
        and publish this claimer's, instead of counting every leased job in `jobs` (slow in a
        drain: docs/CONCURRENCY.md, "Fair shares"); without it the count is made."""
        if limit <= 0 or not queue_ids:
            return ClaimRound([])
        ids = list(queue_ids)
        at = _cursor_arrays(ids, cursors)
        # The flow connection is opened only when the flow statement runs.
        flow_on = flow_conn if flow_conn is not None else _returning(conn)
        if fair or self._flow_first:
            load = [held.get(q, 0) for q in ids] if fair and held is not None else None
            flow = await self._flow(await flow_on(), ids, limit, fair, at, load)
            self._flow_first = flow.flow_queues > 0
            return flow
        plain = await _run(
            conn, "claim_jobs", self.worker_id, [self.worker_id, self.lease_ms, ids, limit, *at]
        )
        self._flow_first = plain.flow_queues > 0
        if len(plain.jobs) >= limit or plain.flow_queues == 0:
            return plain
        flow = await self._flow(await flow_on(), ids, limit - len(plain.jobs), False, at)
        self._flow_first = flow.flow_queues > 0
        return ClaimRound(
            plain.jobs + flow.jobs,
            flow.retry_in_ms,
            flow.flow_queues,
            ran_dry=plain.ran_dry,
            scanned_at=plain.scanned_at,
        )

    async def _flow(
        self,
        conn: Conn,
        ids: list[UUID],
        limit: int,
        fair: bool,
        at: list[Any],
        held: list[int] | None = None,
    ) -> ClaimRound:
        # A rate-limited queue with room to spare is claimed without its lock ($10); if that
        # put its window over the limit (another claim took the room meanwhile), the statement
        # failed whole and nothing was claimed: claim again, with the lock (claim.sql,
        # migration 0030). Inside the caller's transaction a failed statement would abort it,
        # so there the claim takes the lock from the start.
        # A claim with the lock fails the same way if a claim without it (of another size,
        # on the other side of the threshold) committed starts after its read: claim again.
        in_transaction = isinstance(conn, asyncpg.Connection) and conn.is_in_transaction()
        attempts = [False] if in_transaction else [True, False, False]
        args = [self.worker_id, self.lease_ms, ids, limit, fair, *at, held]
        for attempt, optimistic in enumerate(attempts, start=1):
            try:
                return await _run(conn, "claim_jobs_flow", self.worker_id, [*args, optimistic])
            except asyncpg.SerializationError:
                if attempt == len(attempts):
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")


async def claim_round(
    conn: Conn,
    worker_id: UUID,
    queue_ids: Sequence[UUID],
    limit: int,
    lease_ms: int,
    cursors: Cursors | None = None,
    *,
    fair: bool = False,
) -> ClaimRound:
    """Claim up to `limit` jobs from `queue_ids` for `worker_id`, leased for `lease_ms`.

    Each job moves queued -> claimed with attempt + 1 and execution_seq + 1. Paused queues
    yield nothing; concurrency limits, key limits and rate limits are never exceeded; `fair`
    shares the claim between the queues' projects by weight. A one-off `Claimer`: a worker
    keeps one, so its claims go to the right statement first.
    """
    if lease_ms <= 0:
        raise ValidationError(f"lease_ms must be positive, got {lease_ms}")
    claimer = Claimer(worker_id, lease_ms)
    return await claimer.claim(conn, queue_ids, limit, fair=fair, cursors=cursors)


async def claim(
    conn: Conn,
    worker_id: UUID,
    queue_ids: Sequence[UUID],
    limit: int,
    lease_ms: int,
    cursors: Cursors | None = None,
    *,
    fair: bool = False,
) -> list[ClaimedJob]:
    """Claim up to `limit` jobs from `queue_ids` for `worker_id`, leased for `lease_ms`.

    One statement for all the queues (claim_jobs; claim_jobs_flow as well for queues with flow
    control, see Claimer). Each job moves queued -> claimed with attempt + 1 and
    execution_seq + 1. Paused queues yield nothing; concurrency, key and rate limits are never
    exceeded. Size `limit` to the free slots. `cursors`: per queue, start after where the
    previous claim ended (see ClaimCursor).
    """
    if limit <= 0 or not queue_ids:
        return []
    return (await claim_round(conn, worker_id, queue_ids, limit, lease_ms, cursors, fair=fair)).jobs
