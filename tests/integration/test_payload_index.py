"""The payload search's GIN leaves out leased jobs (migration 0035): a claim and a running mark
write no entry in it, the search still finds jobs in every status, and the jobs list's plan,
generic too, reads the leased jobs through idx_jobs_worker_leased and the rest through the GIN.

Entries are counted with pgstattuple's pgstatginindex: a row version written into the GIN goes
to its pending list first (fastupdate), one pending tuple per row version."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from tests import prerequisites
from tests.factories import make_queue, make_worker
from tests.integration.test_bench_variants import variant_sql
from tests.integration.test_generic_plans import _generic_plan

from codity import core
from codity.api.stores import jobs as jobs_store
from codity.cli.benchmarks import order_payload
from codity.db.queries import Fragments
from codity.devtools import explain
from codity.domain.states import JobStatus

#: The index as it was before migration 0035, every job in it: the benchmarks' variant.
FULL_PAYLOAD_INDEX = variant_sql("payload_gin_full.sql")
#: The API's connections keep generic plans as PostgreSQL chooses; this forces the one it may.
API_GENERIC_PLAN = "SET plan_cache_mode = force_generic_plan"
#: Large enough that the one-condition twin's generic plan walks the primary key (it still reads
#: the GIN at 20,000 jobs of the EXPLAIN harness's fill).
FILL_ROWS = 50_000


async def _pending(db: asyncpg.Connection[Any]) -> int:
    return int(await db.fetchval("SELECT pending_tuples FROM pgstatginindex('idx_jobs_payload')"))


@pytest.mark.parametrize("index", ["as migrated", "twin: every job indexed"])
async def test_a_claim_and_a_running_mark_write_no_payload_entry(
    db: asyncpg.Connection[Any], index: str
) -> None:
    await prerequisites.contrib_extension(db, "pgstattuple")
    await db.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")  # keeps the list
    if index != "as migrated":
        await db.execute(FULL_PAYLOAD_INDEX)
    queue_id = await make_queue(db)
    worker_id = await make_worker(db)
    await core.enqueue(db, queue_id, core.NewJob("noop", payload=order_payload(1)))
    enqueued = await _pending(db)

    [job] = await core.claim(db, worker_id, [queue_id], 1, 30_000)
    claimed = await _pending(db)
    await core.mark_running(db, [job.fence])
    running = await _pending(db)
    await core.complete(db, [core.Completion(fence=job.fence)])
    completed = await _pending(db)

    if index == "as migrated":
        assert (claimed, running) == (enqueued, enqueued)
        assert completed == enqueued + 1  # the finished job is searchable again
    else:
        assert (claimed, running, completed) == (enqueued + 1, enqueued + 2, enqueued + 3)


async def test_the_search_finds_jobs_in_every_status(db: asyncpg.Connection[Any]) -> None:
    queue_id = await make_queue(db)
    project_id = await db.fetchval("SELECT project_id FROM queues WHERE id = $1", queue_id)
    worker_id = await make_worker(db)
    ids = [
        (await core.enqueue(db, queue_id, core.NewJob("noop", payload=p))).id
        for p in ({"customer_id": 42, "n": n} for n in range(4))
    ]
    other = await core.enqueue(db, queue_id, core.NewJob("noop", payload={"customer_id": 7}))
    claimed = await core.claim(db, worker_id, [queue_id], 3, 30_000)
    assert [j.id for j in claimed] == ids[:3]  # ids[3] stays queued
    await core.mark_running(db, [claimed[1].fence])
    await core.complete(db, [core.Completion(fence=claimed[2].fence)])
    status = dict(await db.fetch("SELECT id, status::text FROM jobs"))
    assert sorted(status[i] for i in ids) == ["claimed", "completed", "queued", "running"]

    def search(**filters: Any) -> jobs_store.JobFilter:
        return jobs_store.JobFilter(payload_match={"customer_id": 42}, **filters)

    found = await jobs_store.list_jobs(db, project_id, search(), limit=50, before_id=None)
    assert [j.id for j in found] == sorted(ids, reverse=True)  # newest first, both halves
    assert other.id not in {j.id for j in found}
    # Pages and the other filters apply to both halves.
    page = await jobs_store.list_jobs(db, project_id, search(), limit=2, before_id=ids[3])
    assert [j.id for j in page] == [ids[2], ids[1]]
    leased = search(statuses=[JobStatus.CLAIMED, JobStatus.RUNNING])
    found = await jobs_store.list_jobs(db, project_id, leased, limit=50, before_id=None)
    assert [j.id for j in found] == [ids[1], ids[0]]


async def _generic_plan_indexes(
    db: asyncpg.Connection[Any], text: str, args: tuple[Any, ...]
) -> tuple[set[str], set[str]]:
    """The indexes read and the relations scanned sequentially in the generic plan of `text`
    (as a prepared statement keeps after five runs), with the API's default settings."""
    plan = await _generic_plan(db, "", args, text, settings=API_GENERIC_PLAN)
    nodes = list(explain.walk(plan))
    indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
    seq = {n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"}
    return indexes, seq


async def test_the_lists_generic_plan_reads_both_partial_indexes(
    db: asyncpg.Connection[Any],
) -> None:
    filled = await explain.fill(db, FILL_ROWS)
    assert filled.status_counts["running"] > 0
    project_id = await db.fetchval(
        "SELECT project_id FROM queues WHERE id = $1", filled.claim_queue_id
    )
    match = {"order_id": 100_007}
    q = Fragments().bind(
        "api_jobs_list_by_payload", project_id=project_id, limit=50, payload_match=match
    )
    indexes, seq = await _generic_plan_indexes(db, q.text, q.args)
    assert {"idx_jobs_payload", "idx_jobs_worker_leased"} <= indexes
    assert "jobs" not in seq
    # Twin: the plain list with the search as one condition (OR of the two arms). Its generic
    # plan walks the primary key and tests every payload: the GIN is not read.
    where = Fragments()
    where.add("api_jobs_when_payload", payload_match=match)
    q = where.bind("api_jobs_list", project_id=project_id, limit=50)
    indexes, _ = await _generic_plan_indexes(db, q.text, q.args)
    assert "idx_jobs_payload" not in indexes, indexes
