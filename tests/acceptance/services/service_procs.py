"""Real service processes for acceptance tests: `python -m codity.cli ...` with short intervals.

Each process logs (JSON) to its own file under the test's tmp dir; when a test fails the tails
of those files are printed, which is usually all it takes to see why.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[3]

#: Short intervals so the guarantees show within seconds, not the production half-minutes.
FAST_ENV = {
    "CODITY_ENV": "test",
    "LOG_FORMAT": "json",
    "WORKER_HEARTBEAT_MS": "200",
    "WORKER_LEASE_MS": "1500",
    "WORKER_POLL_INTERVAL_MS": "200",
    "SCHEDULER_TICK_MS": "200",
    "SHUTDOWN_GRACE_MS": "3000",
    "DEAD_WORKER_AFTER_MS": "3000",
}


@dataclass
class Procs:
    tmp: Path
    database_url: str
    started: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def spawn(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        name: str | None = None,
        unset: tuple[str, ...] = (),
    ) -> subprocess.Popen[bytes]:
        label = name or f"{args[0]}-{len(self.started)}"
        log_path = self.tmp / f"{label}.log"
        full_env = {**os.environ, **FAST_ENV, "DATABASE_URL": self.database_url, **(env or {})}
        for key in ("TEST_DATABASE_URL", *unset):
            full_env.pop(key, None)
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "codity.cli", *args],
                env=full_env,
                cwd=cwd or REPO,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        self.started.append((label, proc, log_path))
        return proc

    def logs(self, proc: subprocess.Popen[bytes]) -> str:
        for _, p, path in self.started:
            if p is proc:
                return path.read_text(errors="replace")
        return ""

    def started_named(self, name: str) -> subprocess.Popen[bytes]:
        return next(p for label, p, _ in self.started if label == name)

    def dump(self) -> str:
        out = []
        for label, proc, path in self.started:
            tail = path.read_text(errors="replace")[-4000:] if path.exists() else ""
            out.append(f"----- {label} (pid {proc.pid}, exit {proc.poll()}) -----\n{tail}")
        return "\n".join(out)

    def stop_all(self) -> None:
        for _, proc, _ in self.started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for _, proc, _ in self.started:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def procs(request: pytest.FixtureRequest, tmp_path: Path, database_url: str) -> Iterator[Procs]:
    p = Procs(tmp=tmp_path, database_url=database_url)
    yield p
    p.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(p.dump())


async def wait_workers(
    db: Any, n: int, *, listening: bool = True, timeout_s: float = 30.0
) -> list[Any]:
    """Wait until `n` workers are active (and, by default, their LISTEN connections are up)."""

    async def ready() -> list[Any] | None:
        rows = await db.fetch("SELECT id, pid FROM workers WHERE status = 'active'")
        if len(rows) < n:
            return None
        if listening:
            listeners = await db.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'codity-worker-listen' "
                "AND datname = current_database()"
            )
            if listeners < n:
                return None
        return list(rows)

    rows: list[Any] = await wait_for(ready, timeout_s=timeout_s, what=f"{n} workers")
    return rows


def exit_code(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
