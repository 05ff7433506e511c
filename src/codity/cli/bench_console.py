"""The console's benchmarks behind `codity bench events` (and the events rows of the report).

- event cost: the drain benchmark (`benchmarks.throughput`) with a dashboard watching (the
  live-events triggers firing, migration 0024) and with nobody watching, alternating, so the
  hot path's price for the dashboard's live updates is a ratio of two medians measured side by
  side.
- fan-out: the API in this process under uvicorn with N open event streams on one project,
  while jobs change state R times a second (enqueue batches, one statement each): messages per
  stream per second, delivery delay, the hub's largest mailbox, and the process's memory
  sampled every second (it must stay flat: bounded memory).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import time
from dataclasses import dataclass
from typing import Any

import httpx

from codity import core
from codity.cli import benchmarks
from codity.domain.states import JobStatus

#: Jobs per enqueue statement in the fan-out load (R changes/s = R / BATCH statements/s).
LOAD_BATCH = 100


@dataclass(frozen=True)
class EventCost:
    with_events: float
    without_events: float

    @property
    def cost_percent(self) -> float:
        return (1 - self.with_events / self.without_events) * 100 if self.without_events else 0.0


@dataclass(frozen=True)
class FanOut:
    streams: int
    changes_per_s: float
    seconds: float
    messages_per_stream_per_s: float
    delay_p50_ms: float
    delay_p95_ms: float
    rss_start_mb: float
    rss_end_mb: float
    rss_max_mb: float
    max_backlog: int
    resyncs: int


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def fan_out(server_url: str, streams: int, rate: float, seconds: float) -> FanOut:
    import uvicorn

    from codity.api.app import create_app
    from codity.api.tokens import issue_access_token
    from codity.domain.states import MemberRole
    from codity.settings import Settings

    async with benchmarks.scratch_database(server_url) as url:
        settings = Settings(
            _env_file=None,
            DATABASE_URL=url,
            CODITY_ENV="test",
            JWT_SECRET="bench-" + "x" * 40,
            JWT_REFRESH_SECRET="bench-refresh-" + "y" * 40,
            EVENTS_STREAM_MAX_S=3600,
        )
        app = create_app(settings)
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
        )
        serving = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
            await asyncio.sleep(0.02)
        pool = app.state.pool
        hub = app.state.events
        try:
            await asyncio.wait_for(hub.listening.wait(), 10)
            queue_id = await benchmarks._make_queue(pool)
            project_id, org_id = await pool.fetchrow(
                "SELECT q.project_id, p.org_id FROM queues q JOIN projects p ON p.id = q.project_id "
                "WHERE q.id = $1",
                queue_id,
            )
            user_id = await pool.fetchval(
                "INSERT INTO users (email, password_hash) VALUES ('bench@example.test', 'x') RETURNING id"
            )
            await pool.execute(
                "INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'viewer')",
                org_id,
                user_id,
            )
            token = issue_access_token(
                settings, user_id=user_id, org_id=org_id, role=MemberRole.VIEWER
            )
            received = [0] * streams
            resyncs = [0]
            delays: list[float] = []
            sent_at: dict[int, float] = {}
            limits = httpx.Limits(max_connections=streams + 10)
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=httpx.Timeout(60.0)
            ) as client:
                ready = asyncio.Event()
                opened = [0]

                async def browser(i: int) -> None:
                    url = f"/api/v1/projects/{project_id}/events"
                    async with client.stream(
                        "GET", url, headers={"Authorization": f"Bearer {token}"}
                    ) as response:
                        kind = ""
                        async for line in response.aiter_lines():
                            if line.startswith("event: "):
                                kind = line[7:]
                                if kind == "hello":
                                    opened[0] += 1
                                    if opened[0] == streams:
                                        ready.set()
                                elif kind == "jobs":
                                    received[i] += 1
                                elif kind == "resync":
                                    resyncs[0] += 1
                            elif line.startswith("data: ") and kind == "jobs" and i == 0:
                                # One stream measures delivery delay: newest id named -> its batch.
                                ids = line.split('"job_ids":[', 1)[1].split("]", 1)[0]
                                if ids:
                                    newest = int(ids.split(",")[-1])
                                    for first, t in list(sent_at.items()):
                                        if first <= newest < first + LOAD_BATCH:
                                            delays.append(time.monotonic() - t)
                                            del sent_at[first]

                readers = [asyncio.create_task(browser(i)) for i in range(streams)]
                await asyncio.wait_for(ready.wait(), 60)
                rss = [_rss_mb()]
                backlog = [0]
                start_counts = sum(received)
                started = time.monotonic()
                interval = LOAD_BATCH / rate
                batches = int(seconds * rate / LOAD_BATCH)
                jobs = [core.NewJob("noop")] * LOAD_BATCH

                async def sampler() -> None:
                    while True:
                        await asyncio.sleep(1)
                        rss.append(_rss_mb())

                sampling = asyncio.create_task(sampler())
                for n in range(batches):
                    result = await core.enqueue_many(pool, queue_id, jobs)
                    sent_at[result[0].id] = time.monotonic()
                    backlog[0] = max(
                        backlog[0],
                        max(
                            (s.backlog for subs in hub._subscribers.values() for s in subs),
                            default=0,
                        ),
                    )
                    await asyncio.sleep(max(0.0, started + (n + 1) * interval - time.monotonic()))
                elapsed = time.monotonic() - started
                await asyncio.sleep(1)  # the last flush
                sampling.cancel()
                for r in readers:
                    r.cancel()
                for r in readers:
                    with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                        await r
            ordered = sorted(delays) or [0.0]
            return FanOut(
                streams=streams,
                changes_per_s=batches * LOAD_BATCH / elapsed,
                seconds=elapsed,
                messages_per_stream_per_s=(sum(received) - start_counts) / streams / elapsed,
                delay_p50_ms=benchmarks.percentile(ordered, 0.5) * 1000,
                delay_p95_ms=benchmarks.percentile(ordered, 0.95) * 1000,
                rss_start_mb=rss[0],
                rss_end_mb=rss[-1],
                rss_max_mb=max(rss),
                max_backlog=backlog[0],
                resyncs=resyncs[0],
            )
        finally:
            server.should_exit = True
            await asyncio.wait_for(serving, 30)


def event_cost_run(server_url: str, jobs: int, workers: int, capacity: int) -> tuple[float, float]:
    """One drain with a dashboard watching, then one with nobody watching: jobs/s of each."""
    on = asyncio.run(
        benchmarks.throughput(server_url, jobs, workers, capacity, watched=True)
    ).jobs_per_s
    off = asyncio.run(benchmarks.throughput(server_url, jobs, workers, capacity)).jobs_per_s
    return on, off


def event_cost(runs: list[tuple[float, float]]) -> EventCost:
    return EventCost(statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))


@dataclass(frozen=True)
class ReadTiming:
    read: str
    p50_ms: float
    p95_ms: float


async def dashboard_reads(
    server_url: str, jobs: int, logs: int, tenants: int, repeats: int
) -> list[ReadTiming]:
    """Every dashboard read, through the API's stores, with `jobs` jobs (spread over `tenants`
    projects, the measured one among them) and `logs` log lines in the database: p50/p95 of
    `repeats` calls each. Rows are written with set-based INSERTs (user triggers off for the
    fill only), then VACUUM ANALYZE, as a long-lived database would be."""
    from datetime import UTC, datetime

    from codity.api.app import api_server_settings
    from codity.api.schemas.charts import ChartWindow
    from codity.api.stores import charts as charts_store
    from codity.api.stores import dead_letters as dl_store
    from codity.api.stores import jobs as jobs_store
    from codity.api.stores import overview as overview_store
    from codity.api.stores import queues as queues_store
    from codity.api.stores import workers as workers_store
    from codity.db.pool import create_pool
    from codity.domain.payload_match import parse_payload_match
    from codity.settings import get_settings

    async with benchmarks.scratch_database(server_url) as url:
        pool = await create_pool(url, min_size=1, max_size=2, application_name="codity-bench")
        try:
            queue_ids = []
            for t in range(tenants):
                org = await pool.fetchval(
                    "INSERT INTO organizations (name, slug) VALUES ($1, $1) RETURNING id", f"o{t}"
                )
                project = await pool.fetchval(
                    "INSERT INTO projects (org_id, name, slug) VALUES ($1, 'p', 'p') RETURNING id",
                    org,
                )
                for name in ("emails", "reports", "webhooks"):
                    queue_ids.append(
                        await pool.fetchval(
                            "INSERT INTO queues (project_id, name) VALUES ($1, $2) RETURNING id",
                            project,
                            name,
                        )
                    )
            project_id, org_id = await pool.fetchrow(
                "SELECT q.project_id, p.org_id FROM queues q JOIN projects p ON p.id = q.project_id"
                " WHERE q.id = $1",
                queue_ids[0],
            )
            await pool.execute("ALTER TABLE jobs DISABLE TRIGGER USER")
            await pool.execute(
                """INSERT INTO jobs (queue_id, handler, payload, status, max_attempts, attempt,
                                     execution_seq, last_error, created_at, run_at, finished_at)
                   SELECT ($1::uuid[])[1 + i % array_length($1::uuid[], 1)],
                          (ARRAY['email.send', 'report.generate', 'http_request'])[1 + i % 3],
                          jsonb_build_object('customer_id', i % 50000, 'order', jsonb_build_object('id', 'A-' || i)),
                          (CASE WHEN i % 100 = 0 THEN 'dead_letter' WHEN i % 50 = 0 THEN 'queued'
                                ELSE 'completed' END)::job_status,
                          3, 1, 1,
                          CASE WHEN i % 100 = 0 THEN 'SMTP 550 mailbox ' || (i % 7) || ' unavailable' END,
                          now() - (i % 604800) * interval '1 second',
                          now() - (i % 604800) * interval '1 second',
                          CASE WHEN i % 50 = 0 THEN NULL ELSE now() - (i % 604800) * interval '1 second' END
                   FROM generate_series(1, $2::integer) i""",
                queue_ids,
                jobs,
            )
            await pool.execute("ALTER TABLE jobs ENABLE TRIGGER USER")
            await pool.execute(
                """INSERT INTO job_executions (job_id, queue_id, execution_seq, attempt, status,
                                               claimed_at, started_at, finished_at)
                   SELECT id, queue_id, 1, 1, 'completed', finished_at, finished_at, finished_at
                   FROM jobs WHERE status = 'completed'"""
            )
            await pool.execute(
                """INSERT INTO job_logs (job_id, execution_seq, level, message)
                   SELECT 1 + (i % $2::integer), 1, 'info', 'step ' || i
                   FROM generate_series(1, $1::integer) i""",
                logs,
                jobs,
            )
            await pool.execute(
                """INSERT INTO dead_letter_jobs (job_id, queue_id, handler, payload, error, attempts)
                   SELECT id, queue_id, handler, payload, last_error, 3 FROM jobs
                   WHERE status = 'dead_letter'"""
            )
            await pool.execute("VACUUM ANALYZE")
            # The reads run on connections with the API's own settings (statement_timeout, JIT
            # off), as the API runs them; the fill above needed neither.
            await pool.close()
            pool = await create_pool(
                url,
                min_size=1,
                max_size=2,
                application_name="codity-bench",
                server_settings=api_server_settings(get_settings()),
            )
            some_job = await pool.fetchval(
                "SELECT max(j.id) FROM jobs j WHERE j.queue_id = $1", queue_ids[0]
            )
            oldest = await pool.fetchval(
                "SELECT min(j.id) + 1 FROM jobs j JOIN queues q ON q.id = j.queue_id "
                "WHERE q.project_id = $1",
                project_id,
            )
            now = datetime.now(UTC)
            reads: dict[str, Any] = {
                "overview": lambda: overview_store.project_overview(
                    pool, project_id, scheduler_tick_ms=10_000
                ),
                "queues list (depth per status)": lambda: queues_store.list_queues(
                    pool, project_id, limit=50, after_name=None
                ),
                "jobs: first page": lambda: jobs_store.list_jobs(
                    pool, project_id, jobs_store.JobFilter(), limit=50, before_id=None
                ),
                "jobs: status=queued": lambda: jobs_store.list_jobs(
                    pool,
                    project_id,
                    jobs_store.JobFilter(statuses=(JobStatus.QUEUED,)),
                    limit=50,
                    before_id=None,
                ),
                "jobs: last page (oldest)": lambda: jobs_store.list_jobs(
                    pool, project_id, jobs_store.JobFilter(), limit=50, before_id=oldest
                ),
                "jobs: payload customer_id = 4242": lambda: jobs_store.list_jobs(
                    pool,
                    project_id,
                    jobs_store.JobFilter(payload_match=parse_payload_match("customer_id = 4242")),
                    limit=50,
                    before_id=None,
                ),
                "jobs: error words": lambda: jobs_store.list_jobs(
                    pool,
                    project_id,
                    jobs_store.JobFilter(error_text="mailbox 3"),
                    limit=50,
                    before_id=None,
                ),
                "job detail (with logs)": lambda: jobs_store.get_job_detail(
                    pool, project_id, some_job
                ),
                "job logs page": lambda: jobs_store.list_job_logs(
                    pool, project_id, some_job, limit=50, after_id=None
                ),
                "workers": lambda: workers_store.list_workers(
                    pool, org_id, project_id=project_id, status=None, limit=50, after=None
                ),
                "dead letters (page + reasons)": lambda: asyncio.gather(
                    dl_store.list_dead_letters(
                        pool,
                        project_id,
                        queue_id=None,
                        include_replayed=False,
                        limit=50,
                        after=None,
                    ),
                    dl_store.summarise(pool, project_id, queue_id=None, include_replayed=False),
                ),
                "charts 24h": lambda: charts_store.read_charts(
                    pool, project_id, ChartWindow.DAY, now, None
                ),
            }
            out = []
            for name, call in reads.items():
                await call()  # warm the caches once, as a dashboard that has been open would
                times = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    await call()
                    times.append((time.perf_counter() - started) * 1000)
                times.sort()
                out.append(
                    ReadTiming(name, statistics.median(times), benchmarks.percentile(times, 0.95))
                )
            return out
        finally:
            await pool.close()
