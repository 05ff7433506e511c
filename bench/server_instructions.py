"""The server's cost of the engine's statements, counted in instructions (callgrind).

Usage: .venv/bin/python bench/server_instructions.py [--jobs N] [--batch B] [--sql FILE ...]

Wall-clock and CPU time of a statement move by ±20% from run to run on a shared machine; the
instructions a PostgreSQL backend executes for it do not. This starts a throwaway cluster of the
system's binaries (as `codity bench` does, fsync off) with the postmaster under
`valgrind --tool=callgrind` (Debian's valgrind), so every backend writes its instruction count
when its connection closes, and measures, each on a connection of its own after the same
warm-up (plans made), minus a connection that only did the warm-up:

- enqueue: `core.enqueue` of one job (the `insert_job` statement), N times;
- claim: `core.claim` of one job, N times;
- complete: `core.complete` of one job, N times;
- claim+complete: `core.claim` + `core.complete` in batches of B (per job);
- enqueue_many: `core.enqueue_many` of 1,000 jobs with distinct payloads, N/100 times (per job);
- each `--sql FILE`: the file's SQL run once beforehand in the database (a variant: a dropped
  index, a changed trigger), then the five above again.

Slow (every statement runs some 50 times slower under callgrind): a few minutes for the default
300 jobs. Figures are per statement (or per job for the batch), in thousands of instructions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg

from codity import VERSION, core
from codity.cli.benchmarks import BENCH_QUEUE, _make_queue
from codity.db import migrate
from codity.db.cluster import _as_postgres_user_prefix, _free_port, find_system_bin_dir
from codity.db.pool import connect
from codity.worker.connection import GENERIC_PLAN_SETTINGS

WARM_UP = 10
#: Jobs per `core.enqueue_many` call in the bulk enqueue's figure.
BULK = 1_000


@contextlib.contextmanager
def callgrind_cluster() -> Iterator[tuple[str, Path]]:
    bin_dir = find_system_bin_dir()
    if bin_dir is None or shutil.which("valgrind") is None:
        sys.exit("needs the system's PostgreSQL binaries and valgrind (apt-get install valgrind)")
    root = Path(tempfile.mkdtemp(prefix="codity-cg-"))
    data, dumps = root / "data", root / "dumps"
    dumps.mkdir()
    prefix = _as_postgres_user_prefix()
    if prefix:
        for path in (root, dumps):
            shutil.chown(path, user=prefix[2])
    subprocess.run(
        [*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
         "--no-sync"],
        check=True, capture_output=True,
    )  # fmt: skip
    port = _free_port()
    server = subprocess.Popen(
        [*prefix, "valgrind", "--tool=callgrind", "--trace-children=yes", "--vgdb=no",
         f"--callgrind-out-file={dumps}/cg.%p", str(bin_dir / "postgres"), "-D", str(data),
         "-p", str(port), "-k", str(root), "-c", "listen_addresses=127.0.0.1",
         "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "autovacuum=off"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}", dumps
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(60)
        shutil.rmtree(root, ignore_errors=True)


async def _wait_ready(url: str) -> None:
    for _ in range(600):
        with contextlib.suppress(OSError, asyncpg.PostgresError):
            conn = await asyncpg.connect(f"{url}/postgres")
            await conn.close()
            return
        await asyncio.sleep(0.2)
    sys.exit("the cluster under callgrind did not start")


def _instructions(dumps: Path, pid: int) -> int:
    path = dumps / f"cg.{pid}"
    for _ in range(300):
        if path.exists() and path.stat().st_size:
            time.sleep(0.3)  # the dump is written in one go; let it finish
            for line in path.read_text().splitlines():
                if line.startswith(("summary:", "totals:")):
                    path.unlink()
                    return int(line.split()[1])
        time.sleep(0.2)
    raise RuntimeError(f"backend {pid} wrote no callgrind dump")


Step = Callable[[Any, int], Awaitable[None]]


async def _count(url: str, dumps: Path, warm: Step, step: Step, n: int) -> float:
    """Instructions of `n` calls of `step` on a fresh connection, less a connection that only
    ran the warm-up: per call."""
    totals = []
    for calls in (0, n):
        conn = await connect(url, application_name="codity-cg")
        await conn.execute(GENERIC_PLAN_SETTINGS)
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        for i in range(WARM_UP):
            await warm(conn, i)
        for i in range(calls):
            await step(conn, i)
        await conn.close()
        totals.append(_instructions(dumps, pid))
    return (totals[1] - totals[0]) / n


async def measure(
    url: str, dumps: Path, template: str, variant: str | None, n: int, batch: int
) -> dict[str, float]:
    name = f"cg_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(f"{url}/postgres")
    await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    db = f"{url}/{name}"
    try:
        setup = await connect(db, application_name="codity-cg-setup")
        if variant:
            await setup.execute(variant)
        queue = await _make_queue(setup)
        worker = await core.register_worker(
            setup, hostname="cg", pid=0, version=VERSION, capacity=batch,
            queue_ids=[queue], queue_names=[BENCH_QUEUE],
        )  # fmt: skip
        claimed: list[core.ClaimedJob] = []

        async def enqueue(conn: Any, i: int) -> None:
            await core.enqueue(conn, queue, core.NewJob(handler="noop", payload={"i": i}))

        async def claim(conn: Any, _i: int) -> None:
            claimed.extend(await core.claim(conn, worker, [queue], 1, 30_000))

        async def complete(conn: Any, _i: int) -> None:
            await core.complete(conn, [core.Completion(fence=claimed.pop().fence)])

        async def cycle(conn: Any, i: int) -> None:
            await enqueue(conn, i)
            await claim(conn, i)
            await complete(conn, i)

        out = {"enqueue": await _count(db, dumps, cycle, enqueue, n)}
        await core.enqueue_many(setup, queue, [core.NewJob(handler="noop")] * (n + 2 * WARM_UP))
        out["claim"] = await _count(db, dumps, cycle, claim, n)
        out["complete"] = await _count(db, dumps, cycle, complete, n)

        async def drain(conn: Any, _i: int) -> None:
            jobs = await core.claim(conn, worker, [queue], batch, 30_000)
            await core.complete(conn, [core.Completion(fence=j.fence) for j in jobs])

        await core.enqueue_many(setup, queue, [core.NewJob(handler="noop")] * n)
        await setup.execute("VACUUM ANALYZE jobs")
        out[f"claim+complete (batch {batch}, per job)"] = (
            await _count(db, dumps, cycle, drain, max(1, n // batch)) / batch
        )

        async def bulk(conn: Any, i: int) -> None:
            # distinct small payloads, as `codity bench enqueue` sends
            jobs = [core.NewJob(handler="noop", payload={"i": i * BULK + k}) for k in range(BULK)]
            await core.enqueue_many(conn, queue, jobs)

        out[f"enqueue_many ({BULK:,} jobs a call, per job)"] = (
            await _count(db, dumps, cycle, bulk, max(1, n // 100)) / BULK
        )
        await setup.close()
        return out
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--sql", action="append", default=[], help="a variant: SQL run first")
    args = parser.parse_args()
    with callgrind_cluster() as (url, dumps):
        await _wait_ready(url)
        admin = await asyncpg.connect(f"{url}/postgres")
        await admin.execute('CREATE DATABASE "cg_template"')
        await admin.close()
        await asyncio.to_thread(migrate.upgrade, f"{url}/cg_template")
        for variant in [None, *args.sql]:
            sql = Path(variant).read_text() if variant else None
            figures = await measure(url, dumps, "cg_template", sql, args.jobs, args.batch)
            print(variant or "as it is")
            for what, instructions in figures.items():
                print(f"  {what:40s} {instructions / 1000:9.1f}k instructions")


if __name__ == "__main__":
    asyncio.run(main())
