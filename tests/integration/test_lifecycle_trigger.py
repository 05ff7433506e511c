"""The lifecycle check is an AFTER row trigger (migration 0037): the engine's updates of a job
take no row lock of their own before writing the row.

A BEFORE UPDATE row trigger on a table makes PostgreSQL lock every row an UPDATE changes before
writing it (trigger.c: GetTupleForTrigger -> table_tuple_lock), whatever the trigger's WHEN
clause then says: one more heap LOCK record in the WAL per row, beside the update's own. Counted
with pg_walinspect over the writing transaction's own records. That every (from, to) pair is
still refused or allowed as the map says: test_core_operations.py, edge for edge.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from tests import prerequisites
from tests.factories import make_queue, make_worker
from tests.integration.test_bench_variants import variant_sql

from codity import core

#: The trigger as it was before migration 0037 (BEFORE UPDATE): the benchmarks' variant.
BEFORE_ROW_TRIGGER = variant_sql("lifecycle_before_row.sql")
JOBS = 3


async def _heap_locks(db: asyncpg.Connection[Any], write: Callable[[], Awaitable[Any]]) -> int:
    """Heap LOCK records on `jobs` that `write`, run in a transaction of its own, put in the
    WAL (the heartbeat also locks its worker's row)."""
    async with db.transaction():
        await db.execute("SET LOCAL synchronous_commit = on")  # flushed, so readable at commit
        xid = await db.fetchval("SELECT pg_current_xact_id()::xid")
        start = await db.fetchval("SELECT pg_current_wal_insert_lsn()::text")
        await write()
    return int(
        await db.fetchval(
            """SELECT count(*)
               FROM pg_get_wal_records_info($1::text::pg_lsn, pg_current_wal_flush_lsn())
               WHERE xid = $2 AND resource_manager = 'Heap' AND record_type = 'LOCK'
                 AND block_ref LIKE '%/' || pg_relation_filenode('jobs') || ' %'""",
            start,
            xid,
        )
    )


@pytest.mark.parametrize("trigger", ["as migrated", "twin: a BEFORE row trigger"])
async def test_the_running_mark_the_heartbeat_and_the_completion_lock_no_row(
    db: asyncpg.Connection[Any], trigger: str
) -> None:
    await prerequisites.contrib_extension(db, "pg_walinspect")
    if trigger != "as migrated":
        await db.execute(BEFORE_ROW_TRIGGER)
    queue_id = await make_queue(db)
    worker_id = await make_worker(db)
    await core.enqueue_many(db, queue_id, [core.NewJob("noop") for _ in range(JOBS)])
    jobs = await core.claim(db, worker_id, [queue_id], JOBS, 30_000)
    fences = [j.fence for j in jobs]

    locks = [
        await _heap_locks(db, lambda: core.mark_running(db, fences)),
        await _heap_locks(db, lambda: core.heartbeat(db, worker_id, 30_000, fences)),
        await _heap_locks(db, lambda: core.complete(db, [core.Completion(f) for f in fences])),
    ]

    assert (
        await db.fetchval(
            "SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'completed'",
            [j.id for j in jobs],
        )
        == JOBS
    )  # each write did happen
    if trigger == "as migrated":
        assert locks == [0, 0, 0]
    else:  # the twin locks each row it writes first
        assert locks == [JOBS, JOBS, JOBS]
