"""Cron materialisation: turn due schedules into jobs, exactly once per occurrence.

Due schedules are claimed with SKIP LOCKED, so concurrent scheduler replicas split them rather
than double-fire; and each occurrence is enqueued with the idempotency key
`cron:<schedule_id>:<fire time>`, so even two replicas that somehow both fired would make one job.
A missed run (the scheduler was down) fires ONCE; the next run is computed from now, never from
the stored next_run_at, which would otherwise replay the backlog one tick at a time.

A firing is an enqueue like any other: with `limits`, it counts against the project's and the
organisation's enqueue windows (a firing over them is skipped and logged, the schedule moves
on), and with `min_interval_s` (CRON_MIN_INTERVAL_S) no schedule fires more often than that,
whatever its expression says (schedules made before the minimum existed included).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import structlog

from codity.core.connection import Conn, transaction
from codity.core.enqueue import NewJob, _enqueue_rows
from codity.core.quotas import EnqueueLimits, reserve_enqueues
from codity.db.queries import sql
from codity.domain.cron import parse_cron
from codity.domain.errors import CodityError

log = structlog.get_logger(__name__)


def occurrence_key(schedule_id: object, fire_time: datetime) -> str:
    return f"cron:{schedule_id}:{fire_time.astimezone(UTC).isoformat()}"


async def materialise_cron(
    conn: Conn,
    now: datetime | None = None,
    limit: int = 100,
    *,
    limits: EnqueueLimits | None = None,
    min_interval_s: int = 0,
) -> list[int]:
    """Enqueue one job for each due schedule; returns the ids of the jobs (new or existing)."""
    job_ids: list[int] = []
    async with transaction(conn) as tx:
        # The database's clock, not this host's: every replica then agrees on what is due.
        at: datetime = now if now is not None else await tx.fetchval("SELECT now()")
        for s in await tx.fetch(sql("due_schedules"), at, limit):
            try:
                spec = parse_cron(s["cron_expression"], s["timezone"])
            except CodityError as exc:
                log.warning("cron_schedule_disabled", schedule_id=str(s["id"]), reason=exc.message)
                await tx.execute(sql("disable_schedule"), s["id"])
                continue
            fire_time = s["next_run_at"]
            job = NewJob(
                handler=s["handler"],
                payload=s["payload"],
                priority=s["priority"],
                idempotency_key=occurrence_key(s["id"], fire_time),
            )
            refused = (
                await reserve_enqueues(tx, s["project_id"], s["org_id"], 1, limits)
                if limits is not None
                else None
            )
            enqueued = None
            if refused is not None:
                log.warning(
                    "cron_firing_skipped",
                    schedule_id=str(s["id"]),
                    reason=f"enqueue limit of the {refused.scope} reached ({refused.limit}/min)",
                )
            else:
                try:
                    (enqueued,) = await _enqueue_rows(tx, s["queue_id"], [job], [s["id"]])
                except CodityError as exc:
                    log.warning("cron_enqueue_failed", schedule_id=str(s["id"]), reason=exc.message)
            # Never sooner than min_interval_s after this firing (next_after is strictly after).
            earliest = fire_time + timedelta(seconds=max(0, min_interval_s - 1))
            next_run = spec.next_after(max(at, fire_time, earliest))[0]
            await tx.execute(
                sql("advance_schedule"),
                s["id"],
                next_run,
                at,
                enqueued.id if enqueued else None,
            )
            if enqueued is not None:
                job_ids.append(enqueued.id)
    return job_ids
