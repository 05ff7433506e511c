"""The completer batches outcomes that arrive faster than its minimum flush interval.

Run against a real database: the completer's own loop, its own connection, real claims; the
only thing watched from outside is how many `core.complete` statements it sent.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from tests.factories import make_jobs, make_queue, make_worker

from codity import core
from codity.worker import completer as completer_module
from codity.worker.completer import Completer, Finished
from codity.worker.connection import HeldConnection

JOBS = 20
#: Apart enough that a flush (a millisecond or two) is done before the next outcome arrives.
SUBMIT_GAP_S = 0.01


async def _flushes_for_outcomes_arriving_apart(
    db: asyncpg.Connection[Any],
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    min_flush_interval_s: float,
) -> int:
    queue_id = await make_queue(db)
    worker_id = await make_worker(db)
    await make_jobs(db, queue_id, JOBS)
    claimed = await core.claim(db, worker_id, [queue_id], JOBS, 30_000)
    assert len(claimed) == JOBS

    statements = 0
    real_complete = core.complete

    async def counted(conn: Any, completions: Any) -> core.BatchResult:
        nonlocal statements
        statements += 1
        return await real_complete(conn, completions)

    monkeypatch.setattr(completer_module.core, "complete", counted)
    held = HeldConnection(database_url, application_name="codity-worker-test")
    completer = Completer(
        held, write_lock=asyncio.Lock(), min_flush_interval_s=min_flush_interval_s
    )
    stop = asyncio.Event()
    loop = asyncio.create_task(completer.run(stop))
    try:
        for job in claimed:
            completer.submit(Finished(core.Completion(job.fence)))
            await asyncio.sleep(SUBMIT_GAP_S)
        assert await completer.wait_idle(10)
    finally:
        stop.set()
        assert completer.wake is not None
        completer.wake.set()
        await loop
        held.discard()

    assert completer.recorded == JOBS
    completed = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE queue_id = $1 AND status = 'completed'", queue_id
    )
    assert completed == JOBS
    return statements


async def test_outcomes_arriving_faster_than_the_interval_share_a_statement(
    db: asyncpg.Connection[Any], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 20 outcomes 10 ms apart (0.2 s) with flushes at least 0.1 s apart: the first goes at
    # once, the rest in two or three more statements.
    statements = await _flushes_for_outcomes_arriving_apart(db, database_url, monkeypatch, 0.1)
    assert statements <= 5


async def test_without_the_interval_each_outcome_is_its_own_statement(
    db: asyncpg.Connection[Any], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin: the interval removed, every outcome that arrives after the last flush ended
    is flushed by itself (the batching above is the interval's doing)."""
    statements = await _flushes_for_outcomes_arriving_apart(db, database_url, monkeypatch, 0.0)
    assert statements >= JOBS // 2
