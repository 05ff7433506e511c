"""The claim's plan: Limit -> LockRows -> ... -> Index Scan using idx_jobs_claim, no Sort node.

Read from real EXPLAIN (ANALYZE) output on a filled table, plus the break-it check (remove the
id tiebreak from the index and the same assertions fail) and a drift check on docs/EXPLAIN.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg

from codity.db.queries import sql
from codity.devtools import explain

#: Small enough to be quick, large enough that the planner's choice is the one 100k rows get.
FILL_ROWS = 5_000
EXPLAIN_DOC = Path(__file__).resolve().parents[2] / "docs" / "EXPLAIN.md"
SORT_NODES = {"Sort", "Incremental Sort"}


def claim_plan_problems(plan: dict[str, Any]) -> list[str]:
    """Everything wrong with a claim plan; empty when it has the shape the index promises."""
    problems: list[str] = []
    sorts = [n["Node Type"] for n in explain.walk(plan) if n["Node Type"] in SORT_NODES]
    if sorts:
        problems.append(f"plan sorts: {sorts}")
    limit = explain.select_node(plan)
    children = limit.get("Plans", [])
    if not children or children[0]["Node Type"] != "LockRows":
        problems.append(f"Limit is not directly above LockRows: {explain.shape(limit)}")
    if not any(
        n["Node Type"] == "Index Scan" and n.get("Index Name") == "idx_jobs_claim"
        for n in explain.walk(limit)
    ):
        problems.append(f"no Index Scan using idx_jobs_claim under Limit: {explain.shape(limit)}")
    return problems


async def test_full_claim_index_plan_is_limit_lockrows_index_scan_without_sort(
    db: asyncpg.Connection,
) -> None:
    filled = await explain.fill(db, FILL_ROWS)
    plan = await explain.explain_claim_json(db, filled)

    assert claim_plan_problems(plan) == []
    assert explain.shape(explain.select_node(plan)).startswith("Limit -> LockRows -> ")
    # The claim ran for real (ANALYZE) and found rows, and it was rolled back.
    assert explain.select_node(plan)["Actual Rows"] == explain.CLAIM_LIMIT
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE status = 'claimed'") == 0


async def test_without_the_id_tiebreak_the_plan_needs_a_sort(db: asyncpg.Connection) -> None:
    """Break it first: an index that does not match the ORDER BY term for term fails the check."""
    filled = await explain.fill(db, FILL_ROWS)
    await explain.apply(db, explain.CONFIGURATIONS[1])

    problems = claim_plan_problems(await explain.explain_claim_json(db, filled))

    assert any("sorts" in p for p in problems), problems
    assert any("idx_jobs_claim" in p for p in problems), problems


async def test_the_filled_table_has_the_promised_status_mix(db: asyncpg.Connection) -> None:
    filled = await explain.fill(db, FILL_ROWS)
    assert sum(filled.status_counts.values()) == FILL_ROWS
    for status, share in explain.STATUS_MIX:
        expected = FILL_ROWS * share / 100
        assert abs(filled.status_counts[status] - expected) < expected * 0.25 + 20, status


async def test_run_explain_measures_four_configurations_and_drops_its_database(
    pg_server_url: str, tmp_path: Path
) -> None:
    async def scratch_databases() -> set[str]:
        conn = await asyncpg.connect(pg_server_url)
        try:
            rows = await conn.fetch(
                "SELECT datname FROM pg_database WHERE datname LIKE 'codity_explain_%'"
            )
            return {r["datname"] for r in rows}
        finally:
            await conn.close()

    before = await scratch_databases()
    report = await explain.run_explain(pg_server_url, rows=FILL_ROWS, runs=2)
    assert await scratch_databases() == before

    names = [m.configuration.name for m in report.measurements]
    assert names == [c.name for c in explain.CONFIGURATIONS]
    assert all(m.median_ms > 0 and len(m.samples_ms) == 2 for m in report.measurements)
    assert "idx_jobs_claim" in report.measurements[0].shape
    assert "Seq Scan" in report.measurements[-1].shape
    assert "idx_jobs_claim" in report.full_plan_text

    out = tmp_path / "EXPLAIN.md"
    explain.write_report(report, out)
    text = out.read_text()
    assert sql("claim_jobs") in text
    assert all(f"| {name} |" in text for name in names)


def test_docs_explain_matches_the_current_claim_statement() -> None:
    """Changing claim.sql without regenerating docs/EXPLAIN.md (`make explain`) fails here."""
    assert EXPLAIN_DOC.exists(), "docs/EXPLAIN.md is missing: run `make explain`"
    assert sql("claim_jobs") in EXPLAIN_DOC.read_text(), (
        "docs/EXPLAIN.md is stale: the claim statement changed. Regenerate it with `make explain`."
    )


async def _reaper_plan(db: asyncpg.Connection) -> dict[str, Any]:
    """The reaper's statement explained (ANALYZE) on the filled table, rolled back."""
    tx = db.transaction()
    await tx.start()
    try:
        rows = await db.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + sql("reap_expired").replace("$1::integer", "500")
        )
    finally:
        await tx.rollback()
    return explain.root_node(rows)


def reaper_read_problems(plan: dict[str, Any]) -> list[str]:
    """How the reaper finds expired leases: through idx_jobs_worker_leased (every leased job,
    as many as the fleet's capacity; migration 0034 dropped the expiry's own index so a
    heartbeat is a HOT update), never by reading the whole of jobs."""
    nodes = list(explain.walk(plan))
    problems = [
        f"{n['Node Type']} on jobs"
        for n in nodes
        if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "jobs"
    ]
    if not any(n.get("Index Name") == "idx_jobs_worker_leased" for n in nodes):
        problems.append("idx_jobs_worker_leased not read")
    return problems


async def test_the_reaper_reads_the_leased_jobs_index(db: asyncpg.Connection) -> None:
    filled = await explain.fill(db, FILL_ROWS)
    assert filled.status_counts["running"] > 0
    await db.execute(
        "UPDATE jobs SET lock_expires_at = now() - interval '1 s' WHERE id % 2 = 0"
        " AND status IN ('claimed', 'running')"
    )
    await db.execute("ANALYZE jobs")
    plan = await _reaper_plan(db)
    assert reaper_read_problems(plan) == []
    assert plan["Actual Rows"] > 0  # it found expired leases (and was rolled back)


async def test_without_the_leased_index_the_reaper_reads_the_whole_table(
    db: asyncpg.Connection,
) -> None:
    """Break it first: with idx_jobs_worker_leased gone, the same check fails."""
    await explain.fill(db, FILL_ROWS)
    await db.execute("DROP INDEX idx_jobs_worker_leased")
    await db.execute("ANALYZE jobs")
    problems = reaper_read_problems(await _reaper_plan(db))
    assert "idx_jobs_worker_leased not read" in problems, problems
