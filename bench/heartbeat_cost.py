"""A heartbeat's cost for a worker holding many jobs: the beat's time, how many of its lease
extensions were HOT updates, and what the beats left behind in `jobs`.

    .venv/bin/python bench/heartbeat_cost.py --held 1000 --beats 40 --runs 3 \
        [--sql variant.sql ...] [--statement heartbeat_variant.sql]

In a scratch database: one registered worker claims `--held` jobs (lease 60 s), then sends
`--beats` heartbeats holding all of them (`core.heartbeat`, the statement `codity worker`
sends every WORKER_HEARTBEAT_MS). Prints, per variant, the median beat time over the runs, the
share of the extensions that were HOT updates (this backend's own counters, read around each
beat in its transaction) and the size of `jobs` and of its indexes after the beats. A variant
is `--sql FILE` (SQL run in the database first: an index put back, say), `--statement FILE`
(another text for the heartbeat statement, same parameters), and, given both, every `--sql`
with the `--statement`. Measures, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from codity import core
from codity.cli.bench import bench_server
from codity.cli.benchmarks import BENCH_QUEUE, _bench_queue, scratch_database
from codity.core import lease
from codity.db.pool import connect

COUNTERS = (
    "SELECT pg_stat_get_xact_tuples_updated('jobs'::regclass) AS updated,"
    " pg_stat_get_xact_tuples_hot_updated('jobs'::regclass) AS hot"
)
SIZES = (
    "SELECT pg_relation_size('jobs') AS heap,"
    " (SELECT sum(pg_relation_size(indexrelid))::bigint FROM pg_index"
    "  WHERE indrelid = 'jobs'::regclass) AS indexes"
)


async def _run(url: str, held_n: int, beats: int, setup: str | None) -> dict[str, float]:
    conn = await connect(url)
    try:
        if setup:
            await conn.execute(setup)
        queue = await _bench_queue(conn)
        await core.enqueue_many(conn, queue, [core.NewJob("noop")] * held_n)
        worker = await core.register_worker(
            conn,
            hostname="bench",
            pid=0,
            version="bench",
            capacity=held_n,
            queue_ids=[queue],
            queue_names=[BENCH_QUEUE],
            handlers=["noop"],
        )
        held = [j.fence for j in await core.claim(conn, worker, [queue], held_n, 60_000)]
        times: list[float] = []
        updated = hot = 0
        for _ in range(beats):
            async with conn.transaction():
                before = await conn.fetchrow(COUNTERS)
                began = time.perf_counter()
                await core.heartbeat(conn, worker, 60_000, held, in_flight=held_n)
                times.append(time.perf_counter() - began)
                after = await conn.fetchrow(COUNTERS)
            assert before is not None
            assert after is not None
            updated += after["updated"] - before["updated"]
            hot += after["hot"] - before["hot"]
        sizes = await conn.fetchrow(SIZES)
        assert sizes is not None
        return {
            "ms": statistics.median(times) * 1000,
            "hot": hot / updated if updated else 0.0,
            "heap_kb": sizes["heap"] / 1024,
            "indexes_kb": sizes["indexes"] / 1024,
        }
    finally:
        await conn.close()


async def _variant(server: str, args: argparse.Namespace, setup: str | None) -> dict[str, float]:
    runs: list[dict[str, float]] = []
    for _ in range(args.runs):
        async with scratch_database(server) as url:
            runs.append(await _run(url, args.held, args.beats, setup))
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _with_heartbeat(original: Any, statement: str) -> Any:
    """codity.core.lease's statement lookup, with `statement` for the heartbeat."""
    return lambda name: statement if name == "heartbeat" else original(name)


async def measure(server: str, args: argparse.Namespace) -> None:
    variants: list[tuple[str, str | None, str | None]] = [("as it is", None, None)]
    variants += [(f"--sql {p}", Path(p).read_text(), None) for p in args.sql]
    if args.statement:
        statement = Path(args.statement).read_text()
        variants.append((f"--statement {args.statement}", None, statement))
        if args.sql:  # both at once: the schema and the statement as they were, say
            setups = "\n".join(Path(p).read_text() for p in args.sql)
            variants.append(("every --sql with --statement", setups, statement))
    print(f"heartbeat holding {args.held} jobs, {args.beats} beats, median of {args.runs} runs")
    for label, setup, statement in variants:
        original: Any = lease.sql
        if statement is not None:
            lease.sql = _with_heartbeat(original, statement)  # type: ignore[attr-defined]
        try:
            r = await _variant(server, args, setup)
        finally:
            lease.sql = original  # type: ignore[attr-defined]
        print(
            f"  {label:<40} beat {r['ms']:6.1f} ms   HOT {r['hot']:6.1%}   "
            f"jobs {r['heap_kb']:7.0f} kB   its indexes {r['indexes_kb']:7.0f} kB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--held", type=int, default=1000)
    parser.add_argument("--beats", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sql", action="append", default=[], help="a variant: SQL run first")
    parser.add_argument("--statement", help="a variant: another heartbeat statement text")
    parser.add_argument("--dsn", help="a server to use (default: a throwaway cluster)")
    args = parser.parse_args()
    with bench_server(args.dsn) as server:
        asyncio.run(measure(server, args))


if __name__ == "__main__":
    main()
