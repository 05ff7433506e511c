"""Chaos: real `codity worker` and `codity scheduler` processes under random faults while jobs
are enqueued without pause; then the invariants that must hold however the faults fell.

Faults (a seeded schedule; the seed is printed, `CODITY_CHAOS_SEED` replays it):
- a worker SIGKILLed and a new one started, every 2–4 s;
- `pg_terminate_backend` of a random service connection, every 3–5 s;
- a claim's reply lost after its commit, every 2–4 s (the workers reach PostgreSQL through
  `cutter.Cutter`, which drops that reply and closes the connection);
- one of the two schedulers SIGKILLed (not restarted);
- PostgreSQL itself stopped and started again (the test's own cluster; once per 150 s of run),
  down for 1.5 lease periods: every lease in flight runs out while the database is away.

One job in LONG_EVERY runs for 1.3 to 2 lease periods: it completes only if heartbeats keep
extending its lease (and a lease guard stops it when they cannot, in the outage).

Invariants once the faults end: every acknowledged enqueue exists and completed; no job
completed twice; each completion's execution_seq has a ledger entry that ran to its end; no
two runs of one job overlap in time; no job dead-lettered; every service process still alive;
no job left unfinished two lease periods (plus the longest job) after the faults end; some
run longer than the lease completed.

`make test` runs 30 s; `make chaos` runs 10 minutes (`CODITY_CHAOS_S=600`). The figures are
printed: jobs (long ones), kills, backends ended, replies cut, restarts, re-runs, runs stopped,
settle time.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import random
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.acceptance.services.own_cluster import OwnCluster, own_cluster
from tests.acceptance.services.service_procs import Procs
from tests.chaos.cutter import Cutter, running_cutter
from tests.factories import make_queue, make_tenant

from codity import core
from codity.db.pool import connect
from codity.db.reconnect import is_transient

CHAOS_S = float(os.environ.get("CODITY_CHAOS_S", "30"))
SEED = int(os.environ.get("CODITY_CHAOS_SEED") or random.SystemRandom().randrange(10**6))

LEASE_MS, HEARTBEAT_MS, TICK_MS = 3000, 500, 500
WORKERS, CAPACITY = 3, 8
SERVICE_ENV = {
    "WORKER_LEASE_MS": str(LEASE_MS),
    "WORKER_HEARTBEAT_MS": str(HEARTBEAT_MS),
    "SCHEDULER_TICK_MS": str(TICK_MS),
    "WORKER_POLL_INTERVAL_MS": "200",
    "SHUTDOWN_GRACE_MS": "2000",
    "DEAD_WORKER_AFTER_MS": "6000",
}
APP = "tests.chaos.ledger_app"
ENQUEUE_BATCH, ENQUEUE_EVERY_S = 5, 0.05
#: Jobs longer than the lease: one in LONG_EVERY runs this long (ms), so heartbeats matter.
LONG_EVERY = int(os.environ.get("CODITY_CHAOS_LONG_EVERY", "100"))
LONG_MS = (int(1.3 * LEASE_MS), 2 * LEASE_MS)
#: None enqueued in the run's last stretch: one enqueued then could still be waiting behind the
#: backlog the faults left when the settle clock starts, and the settle bound would measure
#: its length, not the recovery.
LONG_UNTIL_S = CHAOS_S - 2 * LONG_MS[1] / 1000
#: The faults' end to an empty queue: the promise is "within two lease periods" (plus the
#: longest job, which may have been claimed again just before the faults ended).
SETTLE_LIMIT_S = (2 * LEASE_MS + LONG_MS[1]) / 1000
SERVICES = ("codity-worker", "codity-worker-listen", "codity-scheduler")
#: Longer than the lease: every lease in flight expires while PostgreSQL is down.
PG_OUTAGE_S = float(os.environ.get("CODITY_CHAOS_OUTAGE_LEASES", "1.5")) * LEASE_MS / 1000

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(int(CHAOS_S) + 300)]


@dataclass
class Figures:
    seed: int
    jobs: int = 0
    long_jobs: int = 0
    long_runs_completed: int = 0
    runs_stopped: int = 0
    kills: int = 0
    kills_skipped: int = 0
    backends_ended: int = 0
    replies_cut: int = 0
    worker_restarts: int = 0
    pg_restarts: int = 0
    scheduler_kills: int = 0
    reruns: int = 0
    settle_s: float = math.nan

    def line(self) -> str:
        return (
            f"chaos {CHAOS_S:.0f} s (seed {self.seed}): {self.jobs} jobs ({self.long_jobs} longer "
            f"than the lease, {self.long_runs_completed} such runs completed), {self.kills} worker "
            f"kills ({self.kills_skipped} skipped: no worker serving yet), "
            f"{self.backends_ended} backends ended, {self.replies_cut} claim replies cut, "
            f"{self.worker_restarts + self.pg_restarts} restarts ({self.worker_restarts} workers, "
            f"{self.pg_restarts} PostgreSQL, down {PG_OUTAGE_S:.1f} s each), "
            f"{self.scheduler_kills} scheduler killed, {self.reruns} re-runs, {self.runs_stopped} "
            f"runs stopped (lease lost or kill), settled {self.settle_s:.2f} s after the faults"
        )


class Db:
    """The test's own connection, reconnected whenever a fault takes it away."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: Any = None

    async def run(self, call: Callable[[Any], Awaitable[Any]], *, patience_s: float = 60) -> Any:
        deadline = time.monotonic() + patience_s
        while True:
            try:
                if self.conn is None or self.conn.is_closed():
                    self.conn = await connect(self.url, application_name="chaos-test")
                return await call(self.conn)
            except Exception as exc:
                # is_transient covers asyncpg's reports of a connection lost at an odd moment
                # of its protocol (InternalClientError): anything else here is a bug.
                if not is_transient(exc) or time.monotonic() > deadline:
                    raise
                if self.conn is not None:
                    self.conn.terminate()
                self.conn = None
                await asyncio.sleep(0.2)

    async def close(self) -> None:
        if self.conn is not None and not self.conn.is_closed():
            await self.conn.close()


@dataclass
class Services:
    procs: Procs
    worker_env: dict[str, str]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    schedulers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    killed_at: dict[int, float] = field(default_factory=dict)  # pid -> wall-clock kill time
    spawned_at: dict[int, float] = field(default_factory=dict)  # pid -> wall-clock start time
    last_serving: set[int] = field(default_factory=set)

    def start_worker(self) -> None:
        n = len(self.procs.started)
        self.workers.append(
            self.procs.spawn("worker", "--app", APP, "--queues", "chaos",
                             "--capacity", str(CAPACITY), env=self.worker_env, name=f"worker-{n}")
        )  # fmt: skip
        self.spawned_at[self.workers[-1].pid] = time.time()

    async def sigkill(self, proc: subprocess.Popen[bytes]) -> None:
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
        self.killed_at[proc.pid] = time.time()

    async def serving(self, db: Db) -> set[int]:
        """Pids of live worker processes registered as active (the last answer, while the
        database cannot be asked)."""
        try:
            rows = await db.run(
                lambda c: c.fetch("SELECT pid FROM workers WHERE status = 'active'"), patience_s=1
            )
        except Exception:
            return self.last_serving - set(self.killed_at)
        self.last_serving = {r["pid"] for r in rows} - set(self.killed_at)
        return self.last_serving

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.workers + self.schedulers if p.pid not in self.killed_at]


def fault_schedule(rng: random.Random) -> list[tuple[float, str]]:
    events: list[tuple[float, str]] = []
    for kind, low, high in (("kill-worker", 2, 4), ("end-backend", 3, 5), ("cut-reply", 2, 4)):
        at = rng.uniform(0.5, low)
        while at < CHAOS_S:
            events.append((at, kind))
            at += rng.uniform(low, high)
    events.append((0.3 * CHAOS_S, "kill-scheduler"))
    restarts = max(1, round(CHAOS_S / 150))
    events += [((i + 0.5) * CHAOS_S / restarts, "restart-postgres") for i in range(restarts)]
    return sorted(events)


async def run_faults(
    rng: random.Random, cluster: OwnCluster, services: Services, cutter: Cutter,
    db: Db, figures: Figures,
) -> None:  # fmt: skip
    started = time.monotonic()
    for at, kind in fault_schedule(rng):
        await asyncio.sleep(max(0.0, started + at - time.monotonic()))
        if kind == "kill-worker":
            # A worker that is serving: on a loaded machine a new process takes seconds to
            # import and register, and kills of workers still starting (which hold nothing)
            # could outpace the starts until no worker serves at all.
            serving = await services.serving(db)
            candidates = [w for w in services.workers if w.pid in serving]
            if not candidates:
                figures.kills_skipped += 1
                continue
            await services.sigkill(rng.choice(candidates))
            figures.kills += 1
            services.start_worker()
            figures.worker_restarts += 1
        elif kind == "end-backend":
            ended = await db.run(
                lambda c: c.fetchval(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = ANY($1) ORDER BY random() LIMIT 1",
                    list(SERVICES),
                ),
                patience_s=15,  # the outage lasts 4.5 s and the restart takes its time
            )
            figures.backends_ended += bool(ended)
        elif kind == "cut-reply":
            cutter.arm()
        elif kind == "kill-scheduler":
            await services.sigkill(services.schedulers[-1])
            figures.scheduler_kills += 1
        elif kind == "restart-postgres":
            await asyncio.to_thread(cluster.stop)
            await asyncio.sleep(PG_OUTAGE_S)
            await asyncio.to_thread(cluster.start)
            figures.pg_restarts += 1


async def enqueue_forever(
    db: Db, queue_id: Any, stop: asyncio.Event, acknowledged: dict[str, int], rng: random.Random,
    long_keys: set[str],
) -> None:  # fmt: skip
    """Enqueue batches until `stop`; a batch whose enqueue failed is retried with the same
    idempotency keys until acknowledged, so every key tried ends up acknowledged once."""
    n = 0
    started = time.monotonic()
    pending: list[str] = []
    while pending or not stop.is_set():
        if not pending:
            pending = [f"chaos-{n + i}" for i in range(ENQUEUE_BATCH)]
            n += ENQUEUE_BATCH
        jobs = []
        for key in pending:
            ms = rng.randint(0, 40)
            if rng.randrange(LONG_EVERY) == 0 and time.monotonic() - started < LONG_UNTIL_S:
                ms = rng.randint(*LONG_MS)
                long_keys.add(key)
            jobs.append(core.NewJob("chaos.record", {"ms": ms}, idempotency_key=key))
        made = await db.run(lambda c, jobs=jobs: core.enqueue_many(c, queue_id, jobs))
        acknowledged.update(zip(pending, (j.id for j in made), strict=True))
        pending = []
        await asyncio.sleep(ENQUEUE_EVERY_S)


def read_ledger(directory: Path) -> list[dict[str, Any]]:
    entries = []
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                entries.append(json.loads(line))
    return entries


async def test_chaos_no_job_lost_stuck_or_completed_twice(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    figures = Figures(seed=SEED)
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    print(f"\nchaos: {CHAOS_S:.0f} s, seed {SEED} (replay with CODITY_CHAOS_SEED={SEED})")
    with own_cluster() as cluster:
        host_port = cluster.url.split("@", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        async with running_cutter(host, int(port)) as (cutter, proxy_port):
            proxied = cluster.url.replace(f":{port}/", f":{proxy_port}/")
            procs = Procs(tmp=tmp_path, database_url=cluster.url)
            services = Services(
                procs,
                worker_env={**SERVICE_ENV, "DATABASE_URL": proxied,
                            "CODITY_CHAOS_LEDGER": str(ledger)},
            )  # fmt: skip
            db = Db(cluster.url)
            try:
                tenant = await db.run(make_tenant)
                queue_id = await db.run(lambda c: make_queue(c, tenant.project_id, name="chaos"))
                for _ in range(WORKERS):
                    services.start_worker()
                services.schedulers = [
                    procs.spawn("scheduler", env=SERVICE_ENV, name=f"scheduler-{i}")
                    for i in range(2)
                ]
                await wait_until_serving(db)
                await check_chaos(rng, cluster, services, cutter, db, figures, ledger, queue_id)
            except BaseException:
                print(procs.dump())
                raise
            finally:
                print(figures.line())
                procs.stop_all()
                await db.close()


async def wait_until_serving(db: Db) -> None:
    deadline = time.monotonic() + 60
    while True:
        n = await db.run(
            lambda c: c.fetchval("SELECT count(*) FROM workers WHERE status = 'active'")
        )
        if n >= WORKERS:
            return
        assert time.monotonic() < deadline, "the workers did not start"
        await asyncio.sleep(0.2)


async def check_chaos(
    rng: random.Random, cluster: OwnCluster, services: Services, cutter: Cutter, db: Db,
    figures: Figures, ledger: Path, queue_id: Any,
) -> None:  # fmt: skip
    acknowledged: dict[str, int] = {}
    long_keys: set[str] = set()
    stop_enqueue = asyncio.Event()
    enqueue_db = Db(db.url)  # a connection of its own: asyncpg runs one statement at a time
    enqueuer = asyncio.create_task(
        enqueue_forever(
            enqueue_db, queue_id, stop_enqueue, acknowledged, random.Random(SEED + 1), long_keys
        )
    )
    try:
        await run_faults(rng, cluster, services, cutter, db, figures)
    except BaseException:
        enqueuer.cancel()
        raise
    finally:
        faults_ended = time.monotonic()
        stop_enqueue.set()
    try:
        await enqueuer
    finally:
        await enqueue_db.close()
    figures.replies_cut = cutter.cuts
    figures.jobs = len(acknowledged)
    figures.long_jobs = len(long_keys)

    # Settle: nothing left to run, within two lease periods of the faults' end.
    unfinished_sql = (
        "SELECT j.id, j.status::text AS status, j.execution_seq, j.lock_expires_at, w.pid"
        " FROM jobs j LEFT JOIN workers w ON w.id = j.worker_id"
        " WHERE j.status NOT IN ('completed', 'dead_letter', 'cancelled') ORDER BY j.id"
    )
    while True:
        unfinished = await db.run(lambda c: c.fetch(unfinished_sql))
        if not unfinished:
            figures.settle_s = time.monotonic() - faults_ended
            break
        if time.monotonic() - faults_ended > SETTLE_LIMIT_S:
            alive = {p.pid for p in services.alive()}
            stuck = [
                f"job {r['id']} {r['status']} (seq {r['execution_seq']}) held by pid {r['pid']} "
                f"({'ALIVE' if r['pid'] in alive else 'dead'}), lease until {r['lock_expires_at']}"
                for r in unfinished[:20]
            ]
            # Which live worker processes ever registered (a worker that cannot even connect
            # serves nothing), and where their connections got to.
            rows = await db.run(lambda c: c.fetch("SELECT pid, status::text FROM workers"))
            by_pid = {r["pid"]: r["status"] for r in rows}
            registered = {
                p.pid: f"{by_pid.get(p.pid, 'NOT REGISTERED')}, spawned "
                       f"{time.time() - services.spawned_at[p.pid]:.1f} s ago"
                for p in services.alive() if p in services.workers
            }  # fmt: skip
            # What the database's sessions were doing then: a stall shows here (a session
            # waiting on a lock, a transaction left open) when it is not the workers' own.
            sessions = await db.run(
                lambda c: c.fetch(
                    "SELECT pid, application_name AS app, state, wait_event_type AS wtype,"
                    " wait_event, pg_blocking_pids(pid) AS blocked_by,"
                    " round(extract(epoch FROM now() - xact_start)::numeric, 1) AS xact_s,"
                    " left(query, 80) AS query FROM pg_stat_activity"
                    " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                )
            )
            raise AssertionError(
                f"{len(unfinished)} job(s) unfinished {SETTLE_LIMIT_S:.0f} s (two lease periods"
                " and the longest job) after the faults ended:\n  "
                + "\n  ".join(stuck)
                + f"\nworkers alive: {registered}\ncutter: accepted {cutter.accepted}, linked "
                f"{cutter.connections}, refused {cutter.refused}, open {cutter.open_links}"
                + f"\nsessions ({len(sessions)}):\n  "
                + "\n  ".join(str(dict(r)) for r in sessions)
            )
        await asyncio.sleep(0.1)

    jobs = {
        r["id"]: r
        for r in await db.run(
            lambda c: c.fetch("SELECT id, status::text AS status, execution_seq FROM jobs")
        )
    }
    # Every acknowledged enqueue exists and completed, and nothing else was created.
    assert set(jobs) == set(acknowledged.values())
    not_completed = {i: r["status"] for i, r in jobs.items() if r["status"] != "completed"}
    assert not not_completed, f"acknowledged but not completed: {not_completed}"
    # No job completed twice.
    twice = await db.run(
        lambda c: c.fetch(
            "SELECT job_id, count(*) AS n FROM job_executions WHERE status = 'completed'"
            " GROUP BY job_id HAVING count(*) > 1"
        )
    )
    assert not twice, f"completed more than once: {[dict(r) for r in twice]}"
    # No job dead-lettered by a kill.
    assert await db.run(lambda c: c.fetchval("SELECT count(*) FROM dead_letter_jobs")) == 0

    entries = read_ledger(ledger)
    runs: dict[tuple[int, int, int], dict[str, Any]] = defaultdict(dict)
    for e in entries:
        run = runs[(e["job"], e["seq"], e["pid"])]
        run[e["ev"]] = e["t"]
        if e["ev"] == "end":
            run["outcome"] = e["outcome"]
    # Each completion's execution_seq has a ledger entry that ran to its end.
    finished_ok = {(job, seq) for (job, seq, _), r in runs.items() if r.get("outcome") == "ok"}
    missing = [(i, r["execution_seq"]) for i, r in jobs.items()
               if (i, r["execution_seq"]) not in finished_ok]  # fmt: skip
    assert not missing, f"completions without a finished run in the ledger: {missing[:20]}"
    # A run without an end belongs to a worker that was killed; it ended at the kill.
    by_job: dict[int, list[tuple[float, float, tuple[int, int, int]]]] = defaultdict(list)
    for key, r in runs.items():
        assert "start" in r, f"a run ended without starting: {key}"
        end = r.get("end")
        if end is None:
            assert key[2] in services.killed_at, f"run {key} never ended and its worker lives"
            end = services.killed_at[key[2]]
        by_job[key[0]].append((r["start"], end, key))
    # No two runs of one job overlap in time.
    for job_id, intervals in by_job.items():
        intervals.sort()
        for (_, end_a, a), (start_b, _, b) in itertools.pairwise(intervals):
            assert start_b >= end_a, f"job {job_id}: run {b} started before run {a} ended"
    figures.reruns = len(runs) - len(by_job)
    figures.runs_stopped = sum(1 for r in runs.values() if r.get("outcome") != "ok")
    # Heartbeats mattered: runs longer than the lease completed, on their lease, not reaped.
    lease_s = LEASE_MS / 1000
    figures.long_runs_completed = sum(
        1 for r in runs.values() if r.get("outcome") == "ok" and r["end"] - r["start"] > lease_s
    )
    # Every service process still alive (the killed ones were killed on purpose).
    for proc in services.alive():
        assert proc.poll() is None, f"{proc.args} (pid {proc.pid}) died: exit {proc.returncode}"
    assert figures.kills > 0
    assert figures.long_runs_completed > 0, "no run longer than the lease completed"
    assert figures.backends_ended > 0
    assert figures.pg_restarts > 0
    assert figures.replies_cut, "no claim reply was cut: the cutter no longer recognises the claim"
