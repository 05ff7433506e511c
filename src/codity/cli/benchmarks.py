"""The benchmark strategies behind `codity bench`: each measures one thing, in this process.

- throughput: N no-op jobs pre-enqueued, W workers (the real `Worker`, in-process like the peer
  script runs its workers) drain them; timed from starting the workers until the database shows
  every job completed (stricter than counting handler calls: completions are batched).
- latency: jobs enqueued at a fixed rate to an idle worker; enqueue -> handler start.
- engine: claim + complete through `codity.core` alone, no worker: the engine's own ceiling.
- enqueue: N jobs with distinct payloads through one `core.enqueue_many` call; and the same N
  through `codity enqueue -n N` in a subprocess (the rate it prints: the enqueue, not Python's
  start-up, which is reported apart as the whole command's wall time).

Every run gets a fresh scratch database so runs cannot warm each other's tables.
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from codity import VERSION, core
from codity.db import migrate
from codity.db.dsn import plain_dsn, with_database
from codity.db.pool import connect, create_pool
from codity.worker import HandlerRegistry, JobContext
from codity.worker.config import WorkerConfig
from codity.worker.service import Worker

ENQUEUE_CHUNK = 5000
BENCH_QUEUE = "bench"


@dataclass(frozen=True)
class Throughput:
    jobs: int
    seconds: float

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    p99_ms: float


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


async def _admin(server_url: str, statement: str) -> None:
    admin = await asyncpg.connect(plain_dsn(server_url))
    try:
        await admin.execute(statement)
    finally:
        await admin.close()


@asynccontextmanager
async def empty_database(server_url: str, prefix: str = "codity_peer") -> AsyncIterator[str]:
    """A new empty database on `server_url` (the peer installs its own schema); dropped after."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    await _admin(server_url, f'CREATE DATABASE "{name}"')
    try:
        yield with_database(server_url, name)
    finally:
        await _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@asynccontextmanager
async def scratch_database(server_url: str) -> AsyncIterator[str]:
    """A new database on `server_url`, migrated to head; dropped afterwards."""
    async with empty_database(server_url, "codity_bench") as url:
        await asyncio.to_thread(migrate.upgrade, url)
        yield url


async def _make_queue(pool: asyncpg.Pool[Any]) -> uuid.UUID:
    org = await pool.fetchval(
        "INSERT INTO organizations (name, slug) VALUES ('bench', 'bench') RETURNING id"
    )
    project = await pool.fetchval(
        "INSERT INTO projects (org_id, name, slug) VALUES ($1, 'bench', 'bench') RETURNING id", org
    )
    queue_id: uuid.UUID = await pool.fetchval(
        "INSERT INTO queues (project_id, name) VALUES ($1, $2) RETURNING id", project, BENCH_QUEUE
    )
    return queue_id


async def _fill(pool: asyncpg.Pool[Any], queue_id: uuid.UUID, n: int, handler: str) -> None:
    for start in range(0, n, ENQUEUE_CHUNK):
        size = min(ENQUEUE_CHUNK, n - start)
        await core.enqueue_many(pool, queue_id, [core.NewJob(handler=handler)] * size)
    await pool.execute("VACUUM ANALYZE jobs")


def _worker_config(url: str, capacity: int) -> WorkerConfig:
    return WorkerConfig(
        database_url=url,
        capacity=capacity,
        queue_names=(BENCH_QUEUE,),
        heartbeat_ms=5000,
        lease_ms=30000,
        poll_interval_ms=500,
        shutdown_grace_ms=5000,
        version=VERSION,
    )


async def _completed(pool: asyncpg.Pool[Any]) -> int:
    count: int = await pool.fetchval("SELECT count(*) FROM jobs WHERE status = 'completed'")
    return count


#: The live-events triggers (migration 0005); `events=False` drops them to measure their cost.
EVENT_TRIGGERS = (
    ("jobs_events_insert", "jobs"),
    ("jobs_events_update", "jobs"),
    ("workers_events_insert", "workers"),
    ("workers_events_status", "workers"),
    ("queues_events_paused", "queues"),
)


async def drop_event_triggers(pool: asyncpg.Pool[Any]) -> None:
    for name, table in EVENT_TRIGGERS:
        await pool.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")


async def throughput(
    server_url: str, jobs: int, workers: int, capacity: int, *, events: bool = True
) -> Throughput:
    registry = HandlerRegistry()
    handled = [0]
    all_handled = asyncio.Event()

    @registry.handler("noop")
    async def noop(ctx: JobContext) -> None:
        handled[0] += 1
        if handled[0] >= jobs:
            all_handled.set()

    async with scratch_database(server_url) as url:
        pool = await create_pool(url, min_size=1, max_size=4, application_name="codity-bench")
        try:
            if not events:
                await drop_event_triggers(pool)
            queue_id = await _make_queue(pool)
            await _fill(pool, queue_id, jobs, "noop")
            stop = asyncio.Event()
            started = time.perf_counter()
            tasks = [
                asyncio.create_task(Worker(_worker_config(url, capacity), registry).run(stop))
                for _ in range(workers)
            ]
            await all_handled.wait()
            # Handlers have all run; the clock stops when the batched completions are recorded.
            while await _completed(pool) < jobs:  # noqa: ASYNC110 - polling the database, not an in-process flag
                await asyncio.sleep(0.005)
            elapsed = time.perf_counter() - started
            stop.set()
            await asyncio.gather(*tasks)
            return Throughput(jobs=jobs, seconds=elapsed)
        finally:
            await pool.close()


async def latency(server_url: str, count: int, rate: float) -> Latency:
    registry = HandlerRegistry()
    samples: list[float] = []
    done = asyncio.Event()

    @registry.handler("lat")
    async def lat(ctx: JobContext) -> None:
        samples.append(time.time() - float(ctx.payload["t"]))
        if len(samples) >= count:
            done.set()

    async with scratch_database(server_url) as url:
        pool = await create_pool(url, min_size=1, max_size=2, application_name="codity-bench")
        try:
            queue_id = await _make_queue(pool)
            stop = asyncio.Event()
            worker = Worker(_worker_config(url, 10), registry)
            task = asyncio.create_task(worker.run(stop))
            await asyncio.wait_for(worker.ready.wait(), 30)
            await asyncio.sleep(0.5)
            for _ in range(count):
                await core.enqueue(
                    pool, queue_id, core.NewJob(handler="lat", payload={"t": time.time()})
                )
                await asyncio.sleep(1 / rate)
            await asyncio.wait_for(done.wait(), 60)
            stop.set()
            await task
        finally:
            await pool.close()
    ordered = sorted(samples)
    return Latency(
        p50_ms=percentile(ordered, 0.50) * 1000,
        p95_ms=percentile(ordered, 0.95) * 1000,
        p99_ms=percentile(ordered, 0.99) * 1000,
    )


async def engine(server_url: str, jobs: int, loops: int, batch: int) -> Throughput:
    async with scratch_database(server_url) as url:
        pool = await create_pool(
            url, min_size=loops, max_size=loops + 1, application_name="codity-bench"
        )
        try:
            queue_id = await _make_queue(pool)
            await _fill(pool, queue_id, jobs, "noop")
            worker_ids = [
                await core.register_worker(
                    pool,
                    hostname="bench",
                    pid=0,
                    version=VERSION,
                    capacity=batch,
                    queue_ids=[queue_id],
                    queue_names=[BENCH_QUEUE],
                )
                for _ in range(loops)
            ]

            async def loop(worker_id: uuid.UUID) -> int:
                done = 0
                while claimed := await core.claim(pool, worker_id, [queue_id], batch, 30_000):
                    await core.complete(pool, [core.Completion(fence=j.fence) for j in claimed])
                    done += len(claimed)
                return done

            started = time.perf_counter()
            counts = await asyncio.gather(*(loop(w) for w in worker_ids))
            elapsed = time.perf_counter() - started
            return Throughput(jobs=sum(counts), seconds=elapsed)
        finally:
            await pool.close()


@dataclass(frozen=True)
class EnqueueRate:
    jobs: int
    seconds: float
    #: CPU seconds this process and its PostgreSQL backend spent on the enqueue: unlike wall
    #: time, they do not depend on what else the machine is running. None when the server's
    #: backend is not a local process we can read (`--dsn` elsewhere).
    client_cpu_s: float
    server_cpu_s: float | None

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds


def _process_cpu_s(pid: int) -> float | None:
    """user + system CPU seconds of a local process, from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def enqueue_rate(server_url: str, jobs: int) -> EnqueueRate:
    """`core.enqueue_many` of `jobs` jobs, each with its own small payload, in one call (it
    chunks, pipelines and commits them as one transaction), on one connection whose backend's
    CPU time is read before and after. The NewJob objects are built before the clock starts:
    the figure is enqueue's, not the caller's."""
    async with scratch_database(server_url) as url:
        conn = await connect(url, application_name="codity-bench")
        try:
            queue_id = await _make_queue(conn)
            backend = await conn.fetchval("SELECT pg_backend_pid()")
            batch = [core.NewJob(handler="noop", payload={"i": i}) for i in range(jobs)]
            server_before, client_before = _process_cpu_s(backend), _own_cpu_s()
            started = time.perf_counter()
            await core.enqueue_many(conn, queue_id, batch)
            elapsed = time.perf_counter() - started
            client_cpu, server_after = _own_cpu_s() - client_before, _process_cpu_s(backend)
            stored: int = await conn.fetchval("SELECT count(*) FROM jobs")
        finally:
            await conn.close()
    server_cpu = (
        server_after - server_before
        if server_after is not None and server_before is not None
        else None
    )
    return EnqueueRate(stored, elapsed, client_cpu, server_cpu)


@dataclass(frozen=True)
class CliEnqueue:
    jobs_per_s: float
    wall_s: float


#: `codity enqueue` prints "... in 1.83 s (54,645 jobs/s)" for a large count.
_CLI_RATE = re.compile(r"enqueued (\d+) jobs .* in ([\d.]+) s \(([\d,]+) jobs/s\)")


async def cli_enqueue_rate(server_url: str, jobs: int) -> CliEnqueue:
    """`codity enqueue bench noop -n JOBS` as a user runs it, in its own process."""
    async with scratch_database(server_url) as url:
        pool = await create_pool(url, min_size=1, max_size=1, application_name="codity-bench")
        try:
            await _make_queue(pool)
        finally:
            await pool.close()
        env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "WARNING"}
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "codity", "enqueue", BENCH_QUEUE, "noop", "-n", str(jobs),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        out, err = await proc.communicate()
        wall = time.perf_counter() - started
        found = _CLI_RATE.search(out.decode())
        if proc.returncode != 0 or found is None or int(found.group(1)) != jobs:
            raise RuntimeError(f"codity enqueue failed: {(out + err).decode().strip()[-300:]}")
        return CliEnqueue(jobs_per_s=float(found.group(3).replace(",", "")), wall_s=wall)


def median(values: list[float]) -> float:
    return statistics.median(values)
