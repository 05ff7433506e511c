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
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from codity import VERSION, core
from codity.db import migrate
from codity.db.dsn import plain_dsn, with_database
from codity.db.pool import connect, create_pool
from codity.db.queries import sql
from codity.worker import HandlerRegistry, JobContext
from codity.worker.config import WorkerConfig
from codity.worker.gc_tuning import tune_for_worker
from codity.worker.service import Worker

ENQUEUE_CHUNK = 5000
BENCH_QUEUE = "bench"


@dataclass(frozen=True)
class CpuUse:
    """Where a drain's CPU went, over its timed window: the whole machine's busy time (from
    /proc/stat: every core, every process, anything else the machine ran meanwhile included)
    and the worker processes' own share of it. The rest is PostgreSQL's (its backends,
    autovacuum, the walwriter) and the benchmark's polling, which is small."""

    seconds: float
    jobs: int
    busy_s: float
    workers_s: float

    @property
    def busy_cores(self) -> float:
        return self.busy_s / self.seconds

    @property
    def server_us_per_job(self) -> float:
        return (self.busy_s - self.workers_s) / self.jobs * 1e6

    @property
    def workers_us_per_job(self) -> float:
        return self.workers_s / self.jobs * 1e6

    def bound_jobs_per_s(self, cores: int) -> float:
        """The drain rate if every core were busy at this CPU cost per job."""
        return cores * self.jobs / self.busy_s


@dataclass(frozen=True)
class Throughput:
    jobs: int
    seconds: float
    #: None where /proc/stat cannot be read (not Linux), or for strategies that do not measure.
    cpu: CpuUse | None = None

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


@asynccontextmanager
async def copy_of(server_url: str, template: str) -> AsyncIterator[str]:
    """A new database copied from `template`, as a file copy: fast even for a million rows,
    and it leaves nothing behind for the timed run to pay. PostgreSQL 15's default strategy,
    WAL_LOG, copies the template page by page through shared buffers and the WAL, and the
    drain that followed spent part of its window writing that copy out (`bench history`:
    the kernel's page-cache copies and zeroing, then absent from the empty run's profile)."""
    name = f"codity_bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(plain_dsn(server_url))
    try:
        strategy = " STRATEGY = FILE_COPY" if admin.get_server_version() >= (15,) else ""
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"{strategy}')
    finally:
        await admin.close()
    try:
        yield with_database(server_url, name)
    finally:
        await _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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


async def _bench_queue(pool: asyncpg.Pool[Any]) -> uuid.UUID:
    """The bench queue of a copied database, or a new one in an empty database."""
    found: uuid.UUID | None = await pool.fetchval(
        "SELECT id FROM queues WHERE name = $1", BENCH_QUEUE
    )
    return found if found is not None else await _make_queue(pool)


def order_payload(n: int) -> dict[str, Any]:
    """A job's payload of about 1 KB, as an application's order job might carry: a customer, an
    order of four lines, tags and a note (about twenty path-and-value pairs for a GIN)."""
    return {
        "customer_id": n,
        "email": f"customer{n}@example.com",
        "order": {
            "id": f"o-{n}",
            "lines": [{"sku": f"sku-{k}", "qty": k + 1, "price": 9.5 + k} for k in range(4)],
            "currency": "EUR",
            "total": 123.45,
        },
        "tags": ["priority", "eu", "web"],
        "note": "x" * 500,
    }


async def _fill(
    pool: asyncpg.Pool[Any],
    queue_id: uuid.UUID,
    n: int,
    handler: str,
    payload: Callable[[int], Any] | None = None,
) -> None:
    """`n` jobs of `handler`; `payload(i)` gives the i-th job's payload (none: empty)."""
    for start in range(0, n, ENQUEUE_CHUNK):
        size = min(ENQUEUE_CHUNK, n - start)
        if payload is None:
            jobs = [core.NewJob(handler=handler)] * size
        else:
            jobs = [core.NewJob(handler=handler, payload=payload(start + k)) for k in range(size)]
        await core.enqueue_many(pool, queue_id, jobs)
    await pool.execute("VACUUM ANALYZE jobs")


def _worker_config(url: str, capacity: int, *, poll_interval_ms: int = 500) -> WorkerConfig:
    return WorkerConfig(
        database_url=url,
        capacity=capacity,
        queue_names=(BENCH_QUEUE,),
        heartbeat_ms=5000,
        lease_ms=30000,
        poll_interval_ms=poll_interval_ms,
        shutdown_grace_ms=5000,
        version=VERSION,
    )


async def _completed(pool: asyncpg.Pool[Any], after_id: int = 0) -> int:
    """Completed jobs with an id above `after_id` (history already in the table is not
    counted)."""
    count: int = await pool.fetchval(
        "SELECT count(*) FROM jobs WHERE status = 'completed' AND id > $1", after_id
    )
    return count


#: Is any job still to be done (queued, or leased)? Each probe reads its partial index
#: (idx_jobs_claim, in its own order: a scalar subquery, since EXISTS drops an ORDER BY and then
#: a sequential scan walks the completed rows at the front of the table to the first queued
#: one; idx_jobs_worker_leased): the jobs not yet done, not the completed ones.
NOTHING_LEFT = """
SELECT (SELECT id FROM jobs WHERE status = 'queued'
        ORDER BY queue_id, priority DESC, run_at, id LIMIT 1) IS NULL
   AND NOT EXISTS (SELECT 1 FROM jobs WHERE status IN ('claimed', 'running'))
"""


async def wait_completed(
    pool: asyncpg.Pool[Any], jobs: int, *, after_id: int = 0, interval_s: float
) -> None:
    """Return once `jobs` jobs with an id above `after_id` are completed.

    Polled with NOTHING_LEFT, not with a count of the completed jobs: that count reads every
    row of `jobs` (a sequential scan, 1.5 ms on 20,000 fresh rows and more as the drain leaves
    dead ones), and polled every 10 ms through a drain it took a fifth of a core or more from
    the drain it timed. The count runs once the probes find nothing left."""
    while True:
        if await pool.fetchval(NOTHING_LEFT) and await _completed(pool, after_id) >= jobs:
            return
        await asyncio.sleep(interval_s)


async def watch_events(pool: asyncpg.Pool[Any]) -> None:
    """Turn the jobs' live-events triggers on for the whole run, as an API process with a
    dashboard open keeps them (migration 0024, codity.api.events.EventHub.watch)."""
    await pool.execute(sql("event_watch"), 24 * 3600)


async def throughput(
    server_url: str,
    jobs: int,
    workers: int,
    capacity: int,
    *,
    watched: bool = False,
    template: str | None = None,
    setup_sql: str | None = None,
    payload: Callable[[int], Any] | None = None,
) -> Throughput:
    """`template`: start from a copy of that database (history already in it) instead of an
    empty one. `watched`: as if a dashboard were open (the live-events triggers fire); without
    it, as a fleet runs while nobody watches. `setup_sql`: run in the database before the jobs
    are enqueued (a variant of the schema: bench/drain_variants.py). `payload(i)`: the i-th
    job's payload (default: empty, as the peer's jobs)."""
    registry = HandlerRegistry()
    handled = [0]
    all_handled = asyncio.Event()

    @registry.handler("noop")
    async def noop(ctx: JobContext) -> None:
        handled[0] += 1
        if handled[0] >= jobs:
            all_handled.set()

    database = scratch_database(server_url) if template is None else copy_of(server_url, template)
    async with database as url:
        pool = await create_pool(url, min_size=1, max_size=4, application_name="codity-bench")
        try:
            if watched:
                await watch_events(pool)
            if setup_sql:
                await pool.execute(setup_sql)
            queue_id = await _bench_queue(pool)
            history: int = await pool.fetchval("SELECT coalesce(max(id), 0) FROM jobs")
            await _fill(pool, queue_id, jobs, "noop", payload)
            stop = asyncio.Event()
            tune_for_worker()  # the settings `codity worker` runs with (worker.gc_tuning)
            meter = CpuMeter(_own_cpu_s)  # the workers run in this process
            meter.start()
            started = time.perf_counter()
            tasks = [
                asyncio.create_task(Worker(_worker_config(url, capacity), registry).run(stop))
                for _ in range(workers)
            ]
            await all_handled.wait()
            # Handlers have all run; the clock stops when the batched completions are recorded.
            await wait_completed(pool, jobs, after_id=history, interval_s=0.005)
            elapsed = time.perf_counter() - started
            cpu = meter.stop(jobs, elapsed)
            stop.set()
            await asyncio.gather(*tasks)
            return Throughput(jobs=jobs, seconds=elapsed, cpu=cpu)
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
            tune_for_worker()  # the settings `codity worker` runs with (worker.gc_tuning)
            worker = Worker(_worker_config(url, 10, poll_interval_ms=1000), registry)
            task = asyncio.create_task(worker.run(stop))
            await asyncio.wait_for(worker.ready.wait(), 30)
            await asyncio.sleep(0.5)
            # One connection held for every enqueue, as the peer's script enqueues on one
            # connection of its own: a pooled statement also pays the pool's reset round trip
            # when the connection goes back, which at 2,000/s put the enqueuer behind its
            # schedule (enqueue round trip p50 1.3 ms for 0.5 ms between jobs).
            async with pool.acquire() as enqueuer:
                began = time.monotonic()
                for i in range(count):
                    await core.enqueue(
                        enqueuer, queue_id, core.NewJob(handler="lat", payload={"t": time.time()})
                    )
                    # Paced by the schedule, not by a fixed sleep after each enqueue: at 2,000/s
                    # the enqueue's own round trip is a large part of the 0.5 ms between jobs.
                    await asyncio.sleep(max(0.0, began + (i + 1) / rate - time.monotonic()))
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


async def _bench_worker(pool: asyncpg.Pool[Any], queue_id: uuid.UUID, capacity: int) -> uuid.UUID:
    """A registered worker of the bench queue, for loops that claim without a `Worker`."""
    return await core.register_worker(
        pool,
        hostname="bench",
        pid=0,
        version=VERSION,
        capacity=capacity,
        queue_ids=[queue_id],
        queue_names=[BENCH_QUEUE],
    )


async def _claim_and_complete(
    conn: Any, worker_id: uuid.UUID, queue_id: uuid.UUID, batch: int, lease_ms: int
) -> int:
    """Claim and complete batches of the queue's jobs until it is dry; the jobs done."""
    done = 0
    while claimed := await core.claim(conn, worker_id, [queue_id], batch, lease_ms):
        await core.complete(conn, [core.Completion(fence=j.fence) for j in claimed])
        done += len(claimed)
    return done


async def engine(server_url: str, jobs: int, loops: int, batch: int) -> Throughput:
    async with scratch_database(server_url) as url:
        pool = await create_pool(
            url, min_size=loops, max_size=loops + 1, application_name="codity-bench"
        )
        try:
            queue_id = await _make_queue(pool)
            await _fill(pool, queue_id, jobs, "noop")
            worker_ids = [await _bench_worker(pool, queue_id, batch) for _ in range(loops)]

            async def loop(worker_id: uuid.UUID) -> int:
                # One connection held per loop, as the worker's producer and completer hold
                # theirs (a pooled statement costs a RESET round trip when it goes back).
                async with pool.acquire() as conn:
                    return await _claim_and_complete(conn, worker_id, queue_id, batch, 30_000)

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


def machine_busy_s() -> float | None:
    """CPU seconds every core of the machine has spent busy since boot (/proc/stat: user, nice,
    system, irq and softirq; not idle, iowait, nor steal: time the hypervisor gave to another
    machine); None where there is no /proc/stat."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Machine busy time and the workers' CPU between `start()` and `stop()`; the caller's
    clock times the same window."""

    def __init__(self, workers_cpu_s: Callable[[], float | None]) -> None:
        #: The worker processes' CPU seconds so far.
        self._workers_cpu_s = workers_cpu_s
        self._busy0: float | None = None
        self._workers0: float | None = None

    def start(self) -> None:
        self._busy0, self._workers0 = machine_busy_s(), self._workers_cpu_s()

    def stop(self, jobs: int, seconds: float) -> CpuUse | None:
        busy, workers = machine_busy_s(), self._workers_cpu_s()
        if busy is None or workers is None or self._busy0 is None or self._workers0 is None:
            return None
        return CpuUse(seconds, jobs, busy - self._busy0, workers - self._workers0)


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


# ---------------------------------------------------------------------------- processes


async def _wait_for(check: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def throughput_processes(
    server_url: str, jobs: int, processes: int, capacity: int
) -> Throughput:
    """N `codity worker` processes (separate OS processes, as deployed) drain N pre-enqueued
    no-op jobs. The queue is paused while they start, so Python's start-up is not timed: the
    clock runs from the resume (and its NOTIFY) until every job is completed."""
    async with scratch_database(server_url) as url:
        pool = await create_pool(url, min_size=1, max_size=2, application_name="codity-bench")
        procs: list[asyncio.subprocess.Process] = []
        try:
            queue_id = await _make_queue(pool)
            project_id = await pool.fetchval(
                "SELECT project_id FROM queues WHERE id = $1", queue_id
            )
            await core.pause_queue(pool, project_id, queue_id)
            await _fill(pool, queue_id, jobs, "noop")
            env = {
                **os.environ,
                "DATABASE_URL": url,
                "LOG_LEVEL": "WARNING",
                "WORKER_HEARTBEAT_MS": "5000",
                "WORKER_LEASE_MS": "30000",
                "WORKER_POLL_INTERVAL_MS": "500",
            }
            command = [
                "-m",
                "codity",
                "worker",
                "--queues",
                BENCH_QUEUE,
                "--capacity",
                str(capacity),
            ]
            for _ in range(processes):
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    *command,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                    env=env,
                )
                procs.append(proc)

            async def all_listening() -> bool:
                n: int = await pool.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name = 'codity-worker-listen'"
                )
                return n >= processes

            await _wait_for(all_listening, 60, f"{processes} worker processes")

            def workers_cpu_s() -> float | None:
                total = 0.0
                for proc in procs:
                    cpu = _process_cpu_s(proc.pid)
                    if cpu is None:
                        return None
                    total += cpu
                return total

            meter = CpuMeter(workers_cpu_s)
            meter.start()
            started = time.perf_counter()
            await core.resume_queue(pool, project_id, queue_id)
            await pool.execute("SELECT pg_notify('codity_jobs', $1::text)", str(queue_id))
            await wait_completed(pool, jobs, interval_s=0.01)
            elapsed = time.perf_counter() - started
            return Throughput(jobs=jobs, seconds=elapsed, cpu=meter.stop(jobs, elapsed))
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.terminate()
            for proc in procs:
                try:
                    await asyncio.wait_for(proc.wait(), 15)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            await pool.close()


# ---------------------------------------------------------------------------- ceiling

#: The minimal SQL any PostgreSQL queue must run per batch: claim (SKIP LOCKED, ordered by a
#: matching partial index), complete, one execution row per job. Tables of its own, no fencing,
#: no triggers, no foreign keys to other tables: a ceiling, not a design.
_CEILING_DDL = """
CREATE TABLE ceiling_jobs (
  id bigserial PRIMARY KEY, queue_id int NOT NULL, status text NOT NULL,
  priority int NOT NULL DEFAULT 0, run_at timestamptz NOT NULL DEFAULT now(),
  attempt int NOT NULL DEFAULT 0, worker_id text, claimed_at timestamptz,
  lock_expires_at timestamptz, finished_at timestamptz, payload jsonb NOT NULL DEFAULT '{}');
CREATE INDEX ceiling_claim ON ceiling_jobs (queue_id, priority DESC, run_at, id)
  WHERE status = 'queued';
CREATE TABLE ceiling_exec (
  id bigserial PRIMARY KEY,
  job_id bigint NOT NULL REFERENCES ceiling_jobs (id) ON DELETE CASCADE,
  seq int NOT NULL, status text NOT NULL, started_at timestamptz, finished_at timestamptz,
  UNIQUE (job_id, seq));
"""
_CEILING_CLAIM = """
UPDATE ceiling_jobs j SET status = 'running', worker_id = $1, claimed_at = now(),
  lock_expires_at = now() + interval '30 s', attempt = j.attempt + 1
FROM (SELECT id FROM ceiling_jobs WHERE queue_id = 1 AND status = 'queued' AND run_at <= now()
      ORDER BY priority DESC, run_at, id FOR UPDATE SKIP LOCKED LIMIT $2) s
WHERE j.id = s.id RETURNING j.id, j.attempt
"""
_CEILING_COMPLETE = """
WITH d AS (UPDATE ceiling_jobs SET status = 'completed', finished_at = now()
           WHERE id = ANY($1::bigint[]) AND worker_id = $2 AND status = 'running'
           RETURNING id, attempt, claimed_at)
INSERT INTO ceiling_exec (job_id, seq, status, started_at, finished_at)
SELECT id, attempt, 'completed', claimed_at, now() FROM d
"""


async def fill_ceiling(url: str, jobs: int, ddl: str = _CEILING_DDL) -> None:
    """The ceiling's tables made anew in `url` (`ddl`: the ceiling's, or a variant of it for
    bench/ probes), with `jobs` queued jobs, vacuumed and analysed."""
    conn = await asyncpg.connect(plain_dsn(url))
    try:
        await conn.execute("DROP TABLE IF EXISTS ceiling_exec, ceiling_jobs")
        await conn.execute(ddl)
        await conn.copy_records_to_table(
            "ceiling_jobs", records=[(1, "queued")] * jobs, columns=["queue_id", "status"]
        )
        await conn.execute("VACUUM ANALYZE ceiling_jobs")
    finally:
        await conn.close()


async def drain_ceiling(
    url: str,
    loops: int,
    batch: int,
    claim: str = _CEILING_CLAIM,
    complete: str = _CEILING_COMPLETE,
) -> Throughput:
    """`loops` connections, each claiming `batch` jobs (`claim`: $1 worker, $2 limit) and
    completing them (`complete`: $1 ids, $2 worker) until the table is dry: the ceiling's
    drain, or a bench/ probe's variant of its statements."""

    async def loop(k: int) -> int:
        c = await asyncpg.connect(plain_dsn(url))
        done = 0
        try:
            while rows := await c.fetch(claim, f"w{k}", batch):
                await c.execute(complete, [r[0] for r in rows], f"w{k}")
                done += len(rows)
        finally:
            await c.close()
        return done

    started = time.perf_counter()
    counts = await asyncio.gather(*(loop(k) for k in range(loops)))
    return Throughput(jobs=sum(counts), seconds=time.perf_counter() - started)


async def ceiling(server_url: str, jobs: int, loops: int, batch: int) -> Throughput:
    """The raw-SQL ceiling on this machine, measured like `engine` (same loops, same batch)."""
    async with empty_database(server_url, "codity_ceiling") as url:
        await fill_ceiling(url, jobs)
        return await drain_ceiling(url, loops, batch)


# ---------------------------------------------------------------------------- history

#: The history template's jobs are enqueued this many at a time, then drained by the engine
#: in claims of HISTORY_BATCH (leases long enough never to expire while it runs).
HISTORY_ROUND = 100_000
HISTORY_BATCH = 1_000
HISTORY_LEASE_MS = 600_000


@asynccontextmanager
async def history_template(server_url: str, finished: int) -> AsyncIterator[str]:
    """A migrated database holding `finished` completed jobs of the bench queue, each with its
    execution row, vacuumed and analysed: the template every history run copies.

    The history is made as production makes it, by the engine: jobs enqueued, then claimed and
    completed in batches, round after round. Rows written straight as 'completed' (the first
    version of this template) packed every page to the table's fillfactor with rows larger
    than a queued job's, which left room for exactly one more on each: the drain's 20,000 new
    jobs then landed on 20,000 pages among the history (the free space map sends an insert to
    any page with room), against 3,664 pages in a history of 1,000,000 the engine made."""
    async with scratch_database(server_url) as url:
        pool = await create_pool(url, min_size=1, max_size=2, application_name="codity-bench")
        try:
            queue_id = await _make_queue(pool)
            worker_id = await _bench_worker(pool, queue_id, HISTORY_BATCH)
            async with pool.acquire() as conn:
                for start in range(0, finished, HISTORY_ROUND):
                    await _fill(pool, queue_id, min(HISTORY_ROUND, finished - start), "noop")
                    await _claim_and_complete(
                        conn, worker_id, queue_id, HISTORY_BATCH, HISTORY_LEASE_MS
                    )
                await conn.execute("VACUUM ANALYZE")
        finally:
            await pool.close()
        name = url.rsplit("/", 1)[-1].split("?", 1)[0]
        yield name


# ---------------------------------------------------------------------------- xmin


@dataclass(frozen=True)
class SteadyRun:
    jobs: int
    jobs_per_s: float
    p50_ms: float
    p99_ms: float
    dead_tuples: int


async def steady(
    server_url: str,
    *,
    seconds: float,
    rate: float,
    workers: int,
    capacity: int,
    hold_snapshot: bool,
) -> SteadyRun:
    """`seconds` of steady enqueue at `rate` jobs/s (batches every 10 ms) while W workers drain,
    then the drain of what is left; optionally with a REPEATABLE READ transaction held open the
    whole time (a slow report, a replica with hot_standby_feedback), which pins the xmin horizon:
    no dead row of `jobs` can be vacuumed while it is open.

    Figures from the database: enqueue -> handler start (created_at -> started_at) p50/p99 over
    every job, and throughput = jobs / (first enqueue -> last completion)."""
    registry = HandlerRegistry()

    @registry.handler("noop")
    async def noop(ctx: JobContext) -> None:
        return None

    async with scratch_database(server_url) as url:
        pool = await create_pool(url, min_size=1, max_size=3, application_name="codity-bench")
        holder = await asyncpg.connect(plain_dsn(url))
        stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        try:
            queue_id = await _make_queue(pool)
            batch_every = 0.01
            per_batch = max(1, round(rate * batch_every))
            if hold_snapshot:
                await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                await holder.fetchval("SELECT count(*) FROM queues")  # takes the snapshot
            tune_for_worker()  # the settings `codity worker` runs with (worker.gc_tuning)
            ws = [Worker(_worker_config(url, capacity), registry) for _ in range(workers)]
            tasks = [asyncio.create_task(w.run(stop)) for w in ws]
            for w in ws:
                await asyncio.wait_for(w.ready.wait(), 30)
            began = time.monotonic()
            total = 0
            batches = int(seconds / batch_every)
            for i in range(batches):
                await core.enqueue_many(pool, queue_id, [core.NewJob(handler="noop")] * per_batch)
                total += per_batch
                await asyncio.sleep(max(0.0, began + (i + 1) * batch_every - time.monotonic()))
            await wait_completed(pool, total, interval_s=0.05)
            row = await pool.fetchrow(
                """SELECT count(*) AS n,
                          extract(epoch FROM max(finished_at) - min(created_at)) AS span,
                          percentile_cont(0.5) WITHIN GROUP (ORDER BY started_at - created_at)
                            AS p50,
                          percentile_cont(0.99) WITHIN GROUP (ORDER BY started_at - created_at)
                            AS p99
                   FROM jobs"""
            )
            dead: int = await pool.fetchval(
                "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'jobs'"
            )
            return SteadyRun(
                jobs=row["n"],
                jobs_per_s=row["n"] / float(row["span"]),
                p50_ms=row["p50"].total_seconds() * 1000,
                p99_ms=row["p99"].total_seconds() * 1000,
                dead_tuples=dead,
            )
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            await holder.close()
            await pool.close()
