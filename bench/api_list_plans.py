"""EXPLAIN the API's job and dead-letter lists on a large table, per filter shape.

    .venv/bin/python bench/api_list_plans.py --rows 1000000

Fills a scratch database (the EXPLAIN harness's fill: one big project, four queues) plus a
small second project (one queue, 2,000 jobs), then for each list filter shape runs EXPLAIN
(ANALYZE) of the statement the API sends (`bind()` with the shape's fragments) and of the
catch-all alternative `(:x IS NULL OR col = :x)`, both under `plan_cache_mode =
force_generic_plan` (what a prepared statement falls back to after five runs) and under the
default (custom) plans. Prints the median of --runs executions per variant, the ratio, and
the access path. Measures, asserts nothing: benchmarks are not tests.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from codity.cli.bench import bench_server
from codity.db.pool import connect
from codity.db.queries import Fragments
from codity.devtools.explain import fill as fill_big_project
from codity.devtools.explain import root_node, scratch_database, walk

#: The catch-all statement the fragments replaced: every filter always present.
CATCH_ALL = """
SELECT j.id, j.queue_id, q.name AS queue_name, j.handler, j.status::text AS status
FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE q.project_id = $1::uuid
  AND ($2::uuid IS NULL OR j.queue_id = $2::uuid)
  AND ($3::job_status[] IS NULL OR j.status = ANY($3::job_status[]))
  AND ($4::uuid IS NULL OR j.batch_id = $4::uuid)
  AND ($5::bigint IS NULL OR j.id < $5::bigint)
ORDER BY j.id DESC LIMIT $6::int
"""


@dataclass(frozen=True)
class Shape:
    name: str
    fragments: dict[str, dict[str, Any]]  # fragment -> its parameters
    catch_all: tuple[Any, ...]  # queue_id, statuses, batch_id, before_id


async def _small_project(conn: asyncpg.Connection[Any], jobs: int) -> tuple[uuid.UUID, uuid.UUID]:
    org = await conn.fetchval(
        "INSERT INTO organizations (name, slug) VALUES ('s','s') RETURNING id"
    )
    project = await conn.fetchval(
        "INSERT INTO projects (org_id, name, slug) VALUES ($1, 's', 's') RETURNING id", org
    )
    queue = await conn.fetchval(
        "INSERT INTO queues (project_id, name) VALUES ($1, 'small') RETURNING id", project
    )
    await conn.execute(
        """INSERT INTO jobs (queue_id, handler, status, max_attempts, finished_at)
           SELECT $1, 'h', CASE WHEN g % 10 = 0 THEN 'dead_letter' ELSE 'completed' END::job_status,
                  3, now() FROM generate_series(1, $2) g""",
        queue,
        jobs,
    )
    await conn.execute("VACUUM ANALYZE jobs")
    return project, queue


_probes = itertools.count()


def _literal(value: Any) -> str:
    """An EXECUTE argument (EXECUTE takes no bind parameters); the PREPARE fixed its type."""
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "'{" + ",".join(map(str, value)) + "}'"
    return f"'{value}'"


async def _median_ms(
    conn: asyncpg.Connection[Any], text: str, args: tuple[Any, ...], runs: int
) -> tuple[float, str]:
    """A named prepared statement (so plan_cache_mode applies, as it does to asyncpg's cached
    statements), executed under EXPLAIN ANALYZE with the given arguments."""
    name = f"probe_{next(_probes)}"
    await conn.execute(f"PREPARE {name} AS {text}")
    values = ", ".join(_literal(a) for a in args)
    times: list[float] = []
    path = ""
    for _ in range(runs + 2):
        plan = root_node(
            await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}({values})")
        )
        times.append(float(plan["Actual Total Time"]))
        scans = [
            f"{n['Node Type']}{' ' + n['Index Name'] if 'Index Name' in n else ''}"
            for n in walk(plan)
            if n.get("Relation Name") == "jobs"
        ]
        path = ", ".join(scans)
    return statistics.median(times[2:]), path


async def measure(url: str, rows: int, runs: int) -> None:
    async with scratch_database(url) as scratch:
        conn = await connect(scratch)
        try:
            filled = await fill_big_project(conn, rows)
            big = await conn.fetchval(
                "SELECT project_id FROM queues WHERE id = $1", filled.claim_queue_id
            )
            small, small_queue = await _small_project(conn, 2000)
            batch = uuid.uuid4()
            await conn.execute(
                "UPDATE jobs SET batch_id = $1 WHERE id IN (SELECT id FROM jobs LIMIT 100)", batch
            )
            last_id = await conn.fetchval("SELECT max(id) - 50000 FROM jobs")
            for project, label, queue in (
                (big, "big project", filled.claim_queue_id),
                (small, "small project", small_queue),
            ):
                shapes = [
                    Shape("no filter", {}, (None, None, None, None)),
                    Shape(
                        "status=dead_letter",
                        {"api_jobs_when_status": {"statuses": ["dead_letter"]}},
                        (None, ["dead_letter"], None, None),
                    ),
                    Shape(
                        "queue + status",
                        {
                            "api_jobs_when_queue": {"queue_id": queue},
                            "api_jobs_when_status": {"statuses": ["dead_letter"]},
                        },
                        (queue, ["dead_letter"], None, None),
                    ),
                    Shape(
                        "batch",
                        {"api_jobs_when_batch": {"batch_id": batch}},
                        (None, None, batch, None),
                    ),
                    Shape(
                        "page 2 (cursor)",
                        {"api_jobs_after": {"before_id": last_id}},
                        (None, None, None, last_id),
                    ),
                ]
                for mode in ("force_generic_plan", "auto"):
                    await conn.execute(f"SET plan_cache_mode = {mode}")
                    print(f"\n## {label}, plan_cache_mode={mode}")
                    print("| shape | fragments | catch-all | ratio | fragments' path |")
                    print("|---|---:|---:|---:|---|")
                    for shape in shapes:
                        where = Fragments()
                        for fragment, params in shape.fragments.items():
                            where.add(fragment, **params)
                        bound = where.bind("api_jobs_list", project_id=project, limit=50)
                        ours, path = await _median_ms(conn, bound.text, bound.args, runs)
                        theirs, _ = await _median_ms(
                            conn, CATCH_ALL, (project, *shape.catch_all, 50), runs
                        )
                        print(
                            f"| {shape.name} | {ours:.2f} ms | {theirs:.2f} ms | "
                            f"{theirs / ours:.1f}x | {path} |"
                        )
        finally:
            await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dsn", help="a server to use (default: a throwaway cluster)")
    args = parser.parse_args()
    with bench_server(args.dsn) as server:
        asyncio.run(measure(server, args.rows, args.runs))


if __name__ == "__main__":
    main()
