"""The completion and the next claim in one statement, beside two, on the ceiling's minimal SQL.

    .venv/bin/python bench/complete_and_claim.py --runs 6 [--shape 4x50 ...] [--dsn URL]

Issue 14 asked whether a worker should record a finished batch and claim the next in one round
trip. This measures the most that could buy, on `codity bench ceiling`'s tables and statements
(no fencing, no triggers): L loops (a connection each) drain 20,000 jobs in batches of B, each
loop either claiming and then completing what it claimed (two statements a batch, as the
ceiling does) or sending one statement that completes the previous batch and claims the next
(the completion's data-modifying CTEs ahead of the claim's UPDATE). The two take turns run by
run; prints the medians and their ratio per shape (LxB). Measures, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import asyncpg

from codity.cli._loop import run as run_loop
from codity.cli.bench import bench_server
from codity.cli.benchmarks import _CEILING_CLAIM, drain_ceiling, empty_database, fill_ceiling
from codity.db.dsn import plain_dsn

#: The ceiling's completion (of $3, worker $1) as CTEs, then its claim (of $2 for worker $1).
COMPLETE_THEN_CLAIM = f"""
WITH d AS (UPDATE ceiling_jobs SET status = 'completed', finished_at = now()
           WHERE id = ANY($3::bigint[]) AND worker_id = $1 AND status = 'running'
           RETURNING id, attempt, claimed_at),
     e AS (INSERT INTO ceiling_exec (job_id, seq, status, started_at, finished_at)
           SELECT id, attempt, 'completed', claimed_at, now() FROM d)
{_CEILING_CLAIM}
"""


async def drain(
    url: str, jobs: int, loops: int, batch: int, *, combined: bool
) -> tuple[float, int]:
    """The drain's rate, and how many of its statements were rolled back by a deadlock."""
    await fill_ceiling(url, jobs)
    if not combined:
        two = await drain_ceiling(url, loops, batch)
        assert two.jobs == jobs, two
        return two.jobs_per_s, 0

    async def loop(k: int) -> int:
        c = await asyncpg.connect(plain_dsn(url))
        worker, done = f"w{k}", 0
        try:
            previous: list[int] = []
            while True:
                try:
                    rows = await c.fetch(COMPLETE_THEN_CLAIM, worker, batch, previous)
                except asyncpg.DeadlockDetectedError:
                    deadlocks[0] += 1  # rolled back whole: the same call again
                    continue
                if not rows:
                    return done  # that call completed the last batch and claimed nothing
                previous = [r[0] for r in rows]
                done += len(rows)
        finally:
            await c.close()

    deadlocks = [0]
    started = time.perf_counter()
    counts = await asyncio.gather(*(loop(k) for k in range(loops)))
    assert sum(counts) == jobs, counts
    return jobs / (time.perf_counter() - started), deadlocks[0]


async def measure(server: str, args: argparse.Namespace) -> None:
    async with empty_database(server, "codity_complete_claim") as url:
        print(f"{args.jobs} jobs, medians of {args.runs} runs each, taking turns")
        for shape in args.shape:
            loops, batch = (int(n) for n in shape.split("x"))
            rates: dict[bool, list[float]] = {False: [], True: []}
            deadlocks = 0
            for run in range(args.runs):
                for combined in (False, True) if run % 2 == 0 else (True, False):
                    rate, lost = await drain(url, args.jobs, loops, batch, combined=combined)
                    rates[combined].append(rate)
                    deadlocks += lost
            two, one = statistics.median(rates[False]), statistics.median(rates[True])
            print(
                f"  {loops} loops x batch {batch}: two statements {two:9,.0f} jobs/s, "
                f"one {one:9,.0f} jobs/s, {one / two:.3f}x; deadlocks in one: {deadlocks}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--shape", action="append", help="LOOPSxBATCH (default 2x100, 4x100, 4x50)")
    parser.add_argument("--dsn", help="a server to use (default: a throwaway cluster)")
    args = parser.parse_args()
    args.shape = args.shape or ["2x100", "4x100", "4x50"]
    with bench_server(args.dsn) as server:
        run_loop(measure(server, args))


if __name__ == "__main__":
    main()
