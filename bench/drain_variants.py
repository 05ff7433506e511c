"""The throughput drain beside variants of the schema: what a change would buy on the clock.

    .venv/bin/python bench/drain_variants.py --runs 5 --sql drop_gin.sql [--sql other.sql ...]
        [--payload order]

`codity bench throughput`'s drain (20,000 no-op jobs, 2 workers x 100, one process) on the
schema as it is and on each variant (`--sql FILE`: SQL run in the scratch database before the
jobs are enqueued: a dropped index, a changed setting), the variants taking turns run by run so
the machine's noise hits each alike. Prints each one's median rate, its ratio to the schema as
it is, the cores busy and the CPU a job (PostgreSQL's side and the workers'). The wall-clock
companion of bench/server_instructions.py, which counts a variant's instructions instead.
`--payload order` gives every job a payload of about 1 KB (`benchmarks.order_payload`: a
customer, an order of four lines, tags, a note) instead of the empty one the peer's jobs have.
Measures, asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from codity.cli._loop import run as run_loop
from codity.cli.bench import bench_server
from codity.cli.benchmarks import Throughput, order_payload, throughput


async def measure(server: str, args: argparse.Namespace) -> None:
    variants = {"as it is": ""} | {f"--sql {p}": Path(p).read_text() for p in args.sql}
    runs: dict[str, list[Throughput]] = {label: [] for label in variants}
    payload = order_payload if args.payload == "order" else None
    for _ in range(args.runs):
        for label, setup in variants.items():
            runs[label].append(
                await throughput(
                    server,
                    args.jobs,
                    args.workers,
                    args.capacity,
                    setup_sql=setup,
                    payload=payload,
                )
            )
    base = statistics.median(r.jobs_per_s for r in runs["as it is"])
    print(
        f"{args.jobs} no-op jobs ({args.payload} payloads), {args.workers} workers x "
        f"{args.capacity}, medians of {args.runs}"
    )
    width = max(len(label) for label in runs)
    for label, results in runs.items():
        rate = statistics.median(r.jobs_per_s for r in results)
        cpus = [r.cpu for r in results if r.cpu is not None]
        cpu = ""
        if cpus:
            cpu = (
                f"  cores {statistics.median(c.busy_cores for c in cpus):.2f}"
                f"  CPU a job {statistics.median(c.server_us_per_job for c in cpus):.1f}"
                f" + {statistics.median(c.workers_us_per_job for c in cpus):.1f} us"
            )
        print(f"  {label:<{width}} {rate:9,.0f} jobs/s  {rate / base:.3f}x{cpu}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--capacity", type=int, default=100)
    parser.add_argument("--sql", action="append", default=[], help="a variant: SQL run first")
    parser.add_argument(
        "--payload", choices=["empty", "order"], default="empty", help="the jobs' payloads"
    )
    parser.add_argument("--dsn", help="a server to use (default: a throwaway cluster)")
    args = parser.parse_args()
    with bench_server(args.dsn) as server:
        run_loop(measure(server, args))


if __name__ == "__main__":
    main()
