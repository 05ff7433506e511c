"""`codity bench recovery`: how fast real service processes recover, as figures.

The acceptance tests keep the guarantees (a killed worker's job is reaped only after its lease
expired, and within one more lease; a drain exits after its grace period, not after its jobs);
how many milliseconds that takes on a given machine is a benchmark's business, measured here:

- **re-run after SIGKILL**: two `codity worker` processes and a `codity scheduler`; the worker
  running a long job is SIGKILLed; time until the job is leased again by the other worker.
  The floor is the lease (the dead worker's last heartbeat plus `WORKER_LEASE_MS`) plus up to one
  scheduler tick; the figure is also given in lease periods.
- **drain on SIGTERM**: the worker holding that job gets SIGTERM; time until the process has
  exited (the job released, attempt refunded). The floor is `SHUTDOWN_GRACE_MS`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from codity import core
from codity.cli.benchmarks import _make_queue, scratch_database
from codity.db.pool import create_pool

LEASE_MS, HEARTBEAT_MS, TICK_MS, GRACE_MS = 1500, 200, 200, 1500
#: Long enough never to finish during a run: only the kill or the drain ends it.
JOB_SECONDS = 600
WAIT_S = 60.0
POLL_S = 0.01


@dataclass(frozen=True)
class Recovery:
    rerun_ms: float
    drain_ms: float


def _env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": url,
        "CODITY_ENV": "test",
        "LOG_LEVEL": "WARNING",
        "LOG_FORMAT": "json",
        "WORKER_LEASE_MS": str(LEASE_MS),
        "WORKER_HEARTBEAT_MS": str(HEARTBEAT_MS),
        "SCHEDULER_TICK_MS": str(TICK_MS),
        "SHUTDOWN_GRACE_MS": str(GRACE_MS),
        "WORKER_POLL_INTERVAL_MS": "200",
    }


def _spawn(env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "codity.cli", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def _until(pool: Any, query: str, *args: Any) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        value = await pool.fetchval(query, *args)
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"benchmark waited {WAIT_S:.0f} s for: {query}")
        await asyncio.sleep(POLL_S)


async def recovery(server_url: str) -> Recovery:
    """One measurement of each figure, with its own database and processes."""
    async with scratch_database(server_url) as url:
        pool = await create_pool(url, min_size=1, max_size=2, application_name="codity-bench")
        env = _env(url)
        procs = [_spawn(env, "worker", "--capacity", "1") for _ in range(2)]
        procs.append(_spawn(env, "scheduler"))
        try:
            queue_id = await _make_queue(pool)
            await _until(pool, "SELECT count(*) >= 2 FROM workers WHERE status = 'active'")
            job = await core.enqueue(
                pool, queue_id, core.NewJob(handler="sleep", payload={"seconds": JOB_SECONDS})
            )
            victim_pid = await _until(
                pool,
                "SELECT w.pid FROM jobs j JOIN workers w ON w.id = j.worker_id"
                " WHERE j.id = $1 AND j.status = 'running'",
                job.id,
            )
            victim = next(p for p in procs if p.pid == victim_pid)
            started = time.monotonic()
            victim.send_signal(signal.SIGKILL)
            survivor_pid = await _until(
                pool,
                "SELECT w.pid FROM jobs j JOIN workers w ON w.id = j.worker_id"
                " WHERE j.id = $1 AND j.execution_seq = 2 AND j.status IN ('claimed', 'running')",
                job.id,
            )
            rerun_s = time.monotonic() - started
            survivor = next(p for p in procs if p.pid == survivor_pid)
            started = time.monotonic()
            survivor.send_signal(signal.SIGTERM)
            await asyncio.to_thread(survivor.wait, WAIT_S)
            drain_s = time.monotonic() - started
            return Recovery(rerun_ms=rerun_s * 1000, drain_ms=drain_s * 1000)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    await asyncio.to_thread(proc.wait, 15)
                except subprocess.TimeoutExpired:
                    proc.kill()
            await pool.close()
