"""The worker's statements keep their index paths in a generic plan.

The worker's producer and writer connections plan each statement once and keep the plan
(`plan_cache_mode = force_generic_plan`, worker.connection): a generic plan knows nothing of
the values, so a statement whose plan depended on them (a join over "10% of jobs") would read
the whole table on every claim or flush. Each statement is PREPAREd and EXPLAINed through the
plan cache with the worker connection's settings (generic plans forced, sequential scans off),
on a filled table and on a nearly empty one that was never analysed (as a worker starting on a
new database makes its plans: there a sequential scan is the cheapest path, and it was kept
while the table grew); none may scan `jobs`, `job_executions` or `job_dependencies`
sequentially, and the claim keeps Limit -> LockRows -> Index Scan.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue, make_worker
from tests.integration.test_explain import claim_plan_problems

from codity import core
from codity.db.queries import sql
from codity.devtools import explain
from codity.worker.connection import GENERIC_PLAN_SETTINGS

GENERIC_FILL_ROWS = 50_000
SMALL_ROWS = 30
BIG_TABLES = {"jobs", "job_executions", "job_dependencies", "job_logs"}


def _seq_scans(plan: dict[str, Any]) -> list[str]:
    return [
        n["Relation Name"]
        for n in explain.walk(plan)
        if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in BIG_TABLES
    ]


async def _generic_plan(
    conn: asyncpg.Connection[Any],
    name: str,
    args: tuple[Any, ...],
    text: str | None = None,
    *,
    settings: str = GENERIC_PLAN_SETTINGS,
) -> Any:
    """EXPLAIN EXECUTE of the named statement (or of `text`, a variant of it) PREPAREd with its
    parameter types, generic plan forced: the plan the worker's connections keep. `settings`:
    another connection's (the API's: only the generic plan forced)."""
    statement = sql(name) if text is None else text
    oids = [t.oid for t in (await conn.prepare(statement)).get_parameters()]
    types = await conn.fetchval(
        "SELECT array_agg(format_type(o, NULL) ORDER BY n) FROM unnest($1::oid[]) "
        "WITH ORDINALITY AS t(o, n)",
        oids,
    )
    await conn.execute(f"PREPARE generic_probe ({', '.join(types)}) AS {statement}")
    try:
        await conn.execute(settings)  # as the worker's connections, unless told
        # EXECUTE takes no bind parameters: the values go in as typed literals.
        literals = [
            await conn.fetchval(f"SELECT quote_nullable($1::{t}::text) || '::{t}'", arg)
            for arg, t in zip(args, types, strict=True)
        ]
        raw = await conn.fetchval(
            f"EXPLAIN (FORMAT JSON) EXECUTE generic_probe ({', '.join(literals)})"
        )
    finally:
        await conn.execute("RESET ALL")  # whatever GENERIC_PLAN_SETTINGS set
        await conn.execute("DEALLOCATE generic_probe")
    return explain.root_node(raw)


@dataclass(frozen=True)
class Filled:
    queue_id: uuid.UUID
    worker_id: uuid.UUID


@pytest.fixture(params=["filled", "new"])
async def filled(db: asyncpg.Connection[Any], request: pytest.FixtureRequest) -> Filled:
    """filled: a queue of GENERIC_FILL_ROWS queued jobs, as a drain begins (the table statistics
    are those of a big queued backlog: where a value-blind plan would rather hash all of jobs).
    new: SMALL_ROWS jobs in a table never analysed, as a worker started on a new database
    plans its statements (a sequential scan of one page is cheaper than any index there)."""
    queue_id = await make_queue(db)
    if request.param == "filled":
        await core.enqueue_many(db, queue_id, [core.NewJob("noop")] * GENERIC_FILL_ROWS)
        await db.execute("VACUUM ANALYZE jobs")
    else:
        await core.enqueue_many(db, queue_id, [core.NewJob("noop")] * SMALL_ROWS)
    return Filled(queue_id, await make_worker(db))


async def test_the_claims_generic_plans_use_the_claim_index_and_the_primary_key(
    db: asyncpg.Connection[Any], filled: Filled
) -> None:
    w, q = filled.worker_id, filled.queue_id
    cursor = ([0], [None], [0])
    plain = (w, 30_000, [q], 100, None, None, None)
    for name, args in (
        ("claim_jobs", plain),
        ("claim_jobs", (w, 30_000, [q], 100, *cursor)),
        ("claim_jobs_flow", (w, 30_000, [q], 100, False, None, None, None, None, False)),
        ("claim_jobs_flow", (w, 30_000, [q], 100, True, *cursor, None, True)),
        ("claim_jobs_flow", (w, 30_000, [q], 100, True, *cursor, [0], True)),  # published loads
    ):
        plan = await _generic_plan(db, name, args)
        assert _seq_scans(plan) == [], f"{name}: {explain.shape(plan)}"
    assert claim_plan_problems(await _generic_plan(db, "claim_jobs", plain)) == []


async def test_the_writers_generic_plans_find_jobs_by_key(
    db: asyncpg.Connection[Any], filled: Filled
) -> None:
    ids = list(range(1, 101))
    workers = [filled.worker_id] * 100
    seqs = [1] * 100
    statements: list[tuple[str, tuple[Any, ...]]] = [
        ("complete_jobs", (ids, workers, seqs, [None] * 100, [None] * 100)),
        ("lock_failing_jobs", (ids, workers, seqs)),
        (
            "apply_failures",
            (
                ids,
                ["queued"] * 100,
                [0] * 100,
                ["e"] * 100,
                [None] * 100,
                ["failed"] * 100,
                [None] * 100,
            ),
        ),
        ("mark_running", (ids, workers, seqs, [None] * 100)),
        ("heartbeat", (filled.worker_id, 30_000, 100, ids, seqs, 0)),
        ("append_logs", (1, filled.worker_id, 1, ["info"], ["m"], [{}], [None])),
        ("cancel_dependants", (ids,)),
        ("notify_queues", ([uuid.uuid4()],)),
    ]
    for name, args in statements:
        plan = await _generic_plan(db, name, args)
        assert _seq_scans(plan) == [], f"{name}: {explain.shape(plan)}"


def _anti_joins(plan: dict[str, Any]) -> list[str]:
    return [
        explain.describe_node(n)
        for n in explain.walk(plan)
        if n.get("Join Type") == "Anti" and n["Node Type"] == "Nested Loop"
    ]


#: The heartbeat's test for a leased job it was not sent, as it was written before: planned as
#: a nested loop comparing every leased job of the worker with every held one.
STRAY_AS_NOT_EXISTS = (
    "AND NOT EXISTS (SELECT 1 FROM held h WHERE h.id = j.id AND h.seq = j.execution_seq)"
)


@pytest.mark.parametrize("variant", ["as-written", "twin-not-exists"])
async def test_the_heartbeat_finds_strays_by_hash_not_by_pairs(
    db: asyncpg.Connection[Any], filled: Filled, variant: str
) -> None:
    """A beat gives back the worker's leased jobs it was not sent: one probe of a hash of the
    held fences per leased job, whatever the number of jobs a worker holds (a worker holding
    1,000 spent 76 of a beat's 88 ms in the pairs). The twin is the NOT EXISTS it replaced,
    whose plan is the nested-loop anti join."""
    text = sql("heartbeat")
    written = "AND (j.id, j.execution_seq::integer) NOT IN (SELECT h.id, h.seq FROM held h)"
    assert written in text
    if variant == "twin-not-exists":
        text = text.replace(written, STRAY_AS_NOT_EXISTS)
    ids = list(range(1, 1001))
    args = (filled.worker_id, 30_000, 1000, ids, [1] * 1000, 0)
    joins = _anti_joins(await _generic_plan(db, "heartbeat", args, text))
    if variant == "as-written":
        assert joins == []
    else:
        assert joins, "the twin's NOT EXISTS was expected to plan as a nested-loop anti join"
