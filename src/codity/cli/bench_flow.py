"""`codity bench flow`: what each flow-control mechanism costs the drain when it is switched on
with room to spare, beside the same drain without it (issue 9's performance targets).

Every run is the throughput benchmark's drain (N no-op jobs pre-enqueued, W real workers in
this process, timed until the database shows every job completed), in a fresh scratch
database, once with the mechanism on and once off, alternating:

- fair shares: two projects with a queue each and half the jobs each; the workers serve both
  (so they claim with fair shares) vs the same two queues with WORKER_FAIR_SHARES off;
- key limit: every job carries one of 1,000 concurrency keys and the queue limits each key to
  10 at once (at most W x capacity jobs run at once: never more than a key's share) vs the same
  jobs and keys with no key limit;
- rate limit: the queue may start 1,000,000 jobs a second (far above the drain rate) vs none.

And the plain claim (`plain_claims`): a queue with none of them set is claimed by `claim_jobs`,
the statement flow control was kept out of; beside it, `claim_jobs_flow` makes the same claim
(which it would if the mechanisms were folded into one statement). Both are timed as the worker
runs them (prepared, the flow statement on a connection that keeps its generic plan), one after
the other, on the same 20,000 queued jobs: each claim runs in a transaction that is rolled back.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Final

import asyncpg

from codity import VERSION, core
from codity.cli.benchmarks import Throughput, scratch_database
from codity.db.pool import connect, create_pool
from codity.db.queries import sql
from codity.worker import HandlerRegistry, JobContext
from codity.worker.config import WorkerConfig
from codity.worker.connection import GENERIC_PLAN_SETTINGS
from codity.worker.gc_tuning import tune_for_worker
from codity.worker.service import Worker

MECHANISMS: Final = ("fair shares", "key limit", "rate limit")
#: The row beside them: the plain claim (none set) vs the flow statement making the same claim.
PLAIN_CLAIM: Final = "plain claim"
KEYS: Final = 1000
KEY_LIMIT: Final = 10
RATE_COUNT: Final = 1_000_000
RATE_PERIOD_MS: Final = 1000
CHUNK: Final = 5000
#: The plain claim's measurement: claims of PLAIN_LIMIT from PLAIN_JOBS queued, PLAIN_CLAIMS of
#: each statement per run (after PLAIN_WARMUP of each, untimed: preparing, plan caching).
PLAIN_JOBS: Final = 20_000
PLAIN_LIMIT: Final = 100
PLAIN_CLAIMS: Final = 200
PLAIN_WARMUP: Final = 20


@dataclass(frozen=True)
class Pair:
    on: Throughput
    off: Throughput


async def _setup(pool: asyncpg.Pool[Any], mechanism: str, on: bool, jobs: int) -> None:
    org = await pool.fetchval(
        "INSERT INTO organizations (name, slug) VALUES ('bench', 'bench') RETURNING id"
    )
    projects = [
        await pool.fetchval(
            "INSERT INTO projects (org_id, name, slug) VALUES ($1, $2, $2) RETURNING id", org, slug
        )
        for slug in (("bench-a", "bench-b") if mechanism == "fair shares" else ("bench",))
    ]
    key_limit = KEY_LIMIT if mechanism == "key limit" and on else None
    rate = (RATE_COUNT, RATE_PERIOD_MS) if mechanism == "rate limit" and on else (None, None)
    queues = [
        await pool.fetchval(
            """INSERT INTO queues (project_id, name, key_concurrency_limit, rate_limit_count,
                                   rate_limit_period_ms)
               VALUES ($1, $2, $3, $4, $5) RETURNING id""",
            project,
            f"bench-{i}",
            key_limit,
            *rate,
        )
        for i, project in enumerate(projects)
    ]
    share = jobs // len(queues)
    for queue_id in queues:
        for start in range(0, share, CHUNK):
            size = min(CHUNK, share - start)
            keyed = mechanism == "key limit"
            batch = [
                core.NewJob("noop", concurrency_key=f"k{(start + i) % KEYS}" if keyed else None)
                for i in range(size)
            ]
            await core.enqueue_many(pool, queue_id, batch)
    await pool.execute("VACUUM ANALYZE jobs")


def _config(url: str, capacity: int, fair: bool) -> WorkerConfig:
    return WorkerConfig(
        database_url=url,
        capacity=capacity,
        queue_names=None,  # every queue: both projects' for fair shares
        heartbeat_ms=5000,
        lease_ms=30000,
        poll_interval_ms=500,
        shutdown_grace_ms=5000,
        version=VERSION,
        fair_shares=fair,
    )


async def drain(
    server_url: str, mechanism: str, on: bool, jobs: int, workers: int, capacity: int
) -> Throughput:
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown mechanism {mechanism!r}")
    registry = HandlerRegistry()
    handled = [0]
    all_handled = asyncio.Event()
    expected = [jobs]  # the jobs _setup enqueues (set to the table's count once it has run)

    @registry.handler("noop")
    async def noop(ctx: JobContext) -> None:
        handled[0] += 1
        if handled[0] >= expected[0]:
            all_handled.set()

    async with scratch_database(server_url) as url:
        pool = await create_pool(url, min_size=1, max_size=4, application_name="codity-bench")
        try:
            await _setup(pool, mechanism, on, jobs)
            total: int = await pool.fetchval("SELECT count(*) FROM jobs")
            expected[0] = total
            fair = mechanism == "fair shares" and on
            stop = asyncio.Event()
            tune_for_worker()  # the settings `codity worker` runs with (worker.gc_tuning)
            started = time.perf_counter()
            tasks = [
                asyncio.create_task(Worker(_config(url, capacity, fair), registry).run(stop))
                for _ in range(workers)
            ]
            # Wait for the handlers first, then poll for the batched completions (as the
            # throughput benchmark does): a count of `jobs` every 5 ms through the whole drain
            # was a fifth of the server's time, on both sides, and diluted each ratio toward 1.
            await all_handled.wait()
            done = "SELECT count(*) FROM jobs WHERE status = 'completed'"
            while await pool.fetchval(done) < total:  # noqa: ASYNC110 - polling the database
                await asyncio.sleep(0.005)
            elapsed = time.perf_counter() - started
            stop.set()
            await asyncio.gather(*tasks)
            return Throughput(jobs=total, seconds=elapsed)
        finally:
            await pool.close()


async def pair(
    server_url: str, mechanism: str, jobs: int, workers: int, capacity: int, *, on_first: bool
) -> Pair:
    """One drain each way; the caller alternates which goes first from run to run."""
    first = await drain(server_url, mechanism, on_first, jobs, workers, capacity)
    second = await drain(server_url, mechanism, not on_first, jobs, workers, capacity)
    return Pair(on=first, off=second) if on_first else Pair(on=second, off=first)


@dataclass(frozen=True)
class ClaimTimes:
    """Milliseconds per claim, as the client saw each statement return."""

    plain: list[float]
    flow: list[float]


async def plain_claims(
    server_url: str,
    jobs: int = PLAIN_JOBS,
    limit: int = PLAIN_LIMIT,
    claims: int = PLAIN_CLAIMS,
    warmup: int = PLAIN_WARMUP,
) -> ClaimTimes:
    """claim_jobs beside claim_jobs_flow on one queue with no flow settings, alternating which
    goes first; each claim rolled back, so every one sees the same queued jobs."""
    async with scratch_database(server_url) as url:
        setup = await connect(url, application_name="codity-bench")
        plain = await connect(url, application_name="codity-bench")
        flow = await connect(url, application_name="codity-bench")
        try:
            await flow.execute(GENERIC_PLAN_SETTINGS)  # as the worker's
            org = await setup.fetchval(
                "INSERT INTO organizations (name, slug) VALUES ('bench', 'bench') RETURNING id"
            )
            project = await setup.fetchval(
                "INSERT INTO projects (org_id, name, slug) VALUES ($1, 'bench', 'bench') "
                "RETURNING id",
                org,
            )
            queue_id = await setup.fetchval(
                "INSERT INTO queues (project_id, name) VALUES ($1, 'bench') RETURNING id", project
            )
            for start in range(0, jobs, CHUNK):
                size = min(CHUNK, jobs - start)
                await core.enqueue_many(setup, queue_id, [core.NewJob("noop")] * size)
            await setup.execute("VACUUM ANALYZE jobs")
            worker_id = await core.register_worker(
                setup, hostname="bench", pid=0, version=VERSION, capacity=limit,
                queue_ids=[queue_id], queue_names=["bench"], handlers=["noop"],
            )  # fmt: skip

            async def one(conn: Any, statement: str, args: list[Any]) -> float:
                tx = conn.transaction()
                await tx.start()
                try:
                    started = time.perf_counter()
                    rows = await conn.fetch(sql(statement), *args)
                    took = (time.perf_counter() - started) * 1000
                finally:
                    await tx.rollback()
                if sum(1 for r in rows if r["id"] is not None) != min(limit, jobs):
                    raise RuntimeError(f"{statement} claimed {len(rows)} of {limit}")
                return took

            base = [worker_id, 30_000, [queue_id], limit]
            times = ClaimTimes(plain=[], flow=[])
            for i in range(warmup + claims):
                pair = [
                    (times.plain, plain, "claim_jobs", [*base, None, None, None]),
                    (
                        times.flow,
                        flow,
                        "claim_jobs_flow",
                        [*base, False, None, None, None, None, False],
                    ),
                ]
                for out, conn, statement, args in pair if i % 2 == 0 else pair[::-1]:
                    took = await one(conn, statement, args)
                    if i >= warmup:
                        out.append(took)
            return times
        finally:
            for conn in (setup, plain, flow):
                await conn.close()
