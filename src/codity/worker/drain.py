"""The drain (SIGTERM / SIGINT): stop claiming, let running handlers finish within the grace
period, give the rest back to the queue without charging the attempt, record what finished."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import structlog

from codity import core
from codity.core.loop_service import retry
from codity.domain.states import WorkerStatus
from codity.worker.completer import Completer
from codity.worker.running import Running

log = structlog.get_logger("codity.worker")

#: How long the drain keeps trying to hand unfinished jobs back when the database is away.
RELEASE_DEADLINE_S = 10.0


async def drain(
    *,
    pool: Any,
    worker_id: UUID,
    running: Running,
    completer: Completer,
    producer: asyncio.Task[None],
    grace_ms: int,
) -> None:
    log.info("draining", in_flight=len(running), grace_ms=grace_ms)
    await retry(
        "mark draining",
        lambda: core.set_worker_status(pool, worker_id, WorkerStatus.DRAINING),
        deadline_s=2.0,
    )
    if not producer.done():
        await asyncio.gather(producer, return_exceptions=True)  # exits at its next check
    tasks = [rj.task for rj in running.jobs.values() if rj.task is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=grace_ms / 1000)
    leftover = list(running.jobs.values())
    # In hand until released: a cancelled attempt leaves `running.jobs` at once, and a
    # heartbeat between that and the release would give it back as a stray ("lost").
    running.releasing = [rj.job.fence for rj in leftover]
    for rj in leftover:
        rj.ctx.cancelled.set()
        if rj.task is not None:
            rj.task.cancel()
    await asyncio.gather(*(rj.task for rj in leftover if rj.task), return_exceptions=True)
    if leftover:
        fences = [rj.job.fence for rj in leftover]
        result = await retry(
            "release", lambda: core.release(pool, fences), deadline_s=RELEASE_DEADLINE_S
        )
        running.releasing = []
        log.info(
            "released unfinished jobs (attempts not charged)",
            job_ids=[rj.job.id for rj in leftover],
            lease_lost=list(result.lease_lost) if result else None,
        )
    if not await completer.wait_idle(RELEASE_DEADLINE_S):
        log.error("results could not be recorded before exit", pending=completer.pending)
    await retry(
        "mark stopped",
        lambda: core.set_worker_status(pool, worker_id, WorkerStatus.STOPPED),
        deadline_s=RELEASE_DEADLINE_S,
    )
    log.info("worker stopped")
