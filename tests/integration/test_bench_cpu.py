"""The drains' CPU accounting (`codity bench throughput`'s CPU row, the processes section's CPU
columns) measures what it says, on both sides, on a few hundred jobs (the benchmark itself is not
run here).

- ours: the in-process drain reports its window's machine busy time and the workers' share of
  it (this process's CPU), and the per-job figures are those two divided by the jobs;
- the peer's script reports the same two counters over its own drain window, or the comparison
  row would quietly lose its peer column.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codity.cli import benchmarks
from codity.db.dsn import plain_dsn

PEER = Path(__file__).resolve().parents[2] / "bench" / "peer_pgqueuer.py"


def test_the_per_job_figures_divide_the_window_by_its_jobs() -> None:
    cpu = benchmarks.CpuUse(seconds=0.5, jobs=10_000, busy_s=0.8, workers_s=0.2)
    assert cpu.busy_cores == pytest.approx(1.6)
    assert cpu.server_us_per_job == pytest.approx(60.0)
    assert cpu.workers_us_per_job == pytest.approx(20.0)
    assert cpu.bound_jobs_per_s(2) == pytest.approx(25_000)


@pytest.mark.skipif(benchmarks.machine_busy_s() is None, reason="needs /proc/stat (Linux)")
async def test_the_in_process_drain_reports_its_cpu(pg_server_url: str) -> None:
    result = await benchmarks.throughput(pg_server_url, 2_000, 2, 100)
    cpu = result.cpu
    assert cpu is not None
    assert cpu.jobs == 2_000
    assert cpu.seconds == pytest.approx(result.seconds, rel=0.2)
    # the workers ran in this process: they used CPU, and the machine was busy at least as
    # long (to the kernel's tick, 10 ms, by which /proc/stat counts)
    assert cpu.workers_s > 0
    assert cpu.busy_s > 0
    assert cpu.busy_s >= cpu.workers_s - 0.02


@pytest.mark.skipif(benchmarks.machine_busy_s() is None, reason="needs /proc/stat (Linux)")
async def test_the_peer_script_reports_the_same_counters(pg_server_url: str) -> None:
    async with benchmarks.empty_database(pg_server_url) as url:
        out = subprocess.run(
            [sys.executable, str(PEER), plain_dsn(url), "500", "2", "100"],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["jobs"] == 500
    assert figures["busy_s"] > 0
    assert figures["workers_s"] > 0
