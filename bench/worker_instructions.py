"""The worker's own cost of a drain, counted in instructions (callgrind): the Python side's
counterpart of server_instructions.py.

    .venv/bin/python bench/worker_instructions.py [--jobs N] [--dsn DSN] [--src DIR ...]

`codity bench throughput`'s drain (N pre-enqueued no-op jobs, 2 workers x 100, one process) runs
with the benchmark's process under `valgrind --tool=callgrind`, instrumentation switched on only
for the drain's timed window (from starting the workers until every job is completed: the
window `benchmarks.CpuMeter` measures), so Python's start-up, the migrations and the enqueue are
not counted. Prints the instructions per job of the workers' process: the executor, the
completer, the producer, asyncpg's encoding and decoding, the event loop. PostgreSQL's side is
not counted (server_instructions.py counts it).

`--src DIR` (repeatable) counts the drain with the code in DIR (a `src` directory: a worktree of
another commit, say) instead of this checkout's, one after the other: an A/B that the machine's
noise cannot move. The drain runs some 30 times slower under callgrind, so its batches and
flushes can differ a little from a real drain's; compare counts made the same way. Measures,
asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"


def _child(dsn: str, jobs: int) -> None:
    """Runs under callgrind: the drain, with instrumentation on for its window only."""
    from codity.cli import benchmarks
    from codity.cli._loop import run as run_loop
    from codity.logs import configure_logging

    configure_logging("WARNING", "console")
    meter_start, meter_stop = benchmarks.CpuMeter.start, benchmarks.CpuMeter.stop

    def instrument(on: bool) -> None:
        subprocess.run(
            ["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
            check=True,
            capture_output=True,
        )

    def start(self: benchmarks.CpuMeter) -> None:
        instrument(True)
        meter_start(self)

    def stop(self: benchmarks.CpuMeter, *args: Any) -> Any:
        result = meter_stop(self, *args)
        instrument(False)
        return result

    benchmarks.CpuMeter.start = start
    benchmarks.CpuMeter.stop = stop
    run_loop(benchmarks.throughput(dsn, jobs, 2, 100))


def _count(src: Path, dsn: str, jobs: int) -> float:
    out = Path(tempfile.mkdtemp(prefix="codity-wcg-")) / "callgrind.out"
    try:
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
             sys.executable, __file__, "--child", "--jobs", str(jobs), "--dsn", dsn],
            check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(src)},
        )  # fmt: skip
        # "totals:", not "summary:": with instrumentation off at start, the summary is 0
        for line in out.read_text().splitlines():
            if line.startswith("totals:"):
                return int(line.split()[1]) / jobs
        raise RuntimeError(f"{out} has no instruction total")
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--dsn", help="PostgreSQL server to use (default: a throwaway cluster)")
    parser.add_argument("--src", action="append", type=Path, default=[], help="code to count")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.dsn, args.jobs)
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("needs valgrind (apt-get install valgrind)")
    from codity.cli.bench import bench_server

    with bench_server(args.dsn) as dsn:
        print(f"{args.jobs} no-op jobs, 2 workers x 100, the workers' process during the drain")
        for src in args.src or [SRC]:
            per_job = _count(src.resolve(), dsn, args.jobs)
            print(f"  {src}  {per_job / 1000:8.1f}k instructions a job")


if __name__ == "__main__":
    main()
