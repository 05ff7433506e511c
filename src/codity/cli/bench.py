"""`codity bench`: measure throughput, latency and the engine's ceiling, beside the peer.

Figures are medians of several runs. With `--peer`, each of our runs is followed by a run of
pgqueuer (the fastest Python peer) against the same server, so the noise of a shared machine
falls on both and the ratio means something. `codity bench report` writes docs/BENCHMARKS.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import asyncpg
import typer
from rich.markup import escape
from rich.table import Table

from codity.cli._common import console, fail, friendly_errors
from codity.db.cluster import throwaway_cluster
from codity.db.dsn import plain_dsn, with_database
from codity.logs import configure_logging

app = typer.Typer(
    help="Benchmarks: ours beside the peer, medians of several runs.", no_args_is_help=True
)

#: Where the peer scripts live (repo checkout); they are dev tools, not part of the package.
PEER_DIR = Path(__file__).resolve().parents[3] / "bench"
REPORT_PATH = Path("docs/BENCHMARKS.md")

DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        help="PostgreSQL server to use (a scratch database is created on it). Default: a throwaway cluster.",
    ),
]
RunsOption = Annotated[
    int, typer.Option("--runs", min=1, help="Runs per side; the median is reported.")
]
PeerOption = Annotated[
    bool, typer.Option("--peer/--no-peer", help="Also run pgqueuer, alternating with ours.")
]


@contextlib.contextmanager
def _server(dsn: str | None) -> Iterator[str]:
    # The workers under test log each job at info; a benchmark only wants its own table.
    configure_logging("WARNING", "console")
    if dsn:
        yield with_database(dsn, "postgres")
        return
    with throwaway_cluster() as cluster:
        yield cluster.url


def _b() -> Any:
    """The strategies module, imported on use: it pulls in the worker, which `codity --help`
    and every other command should not pay for."""
    from codity.cli import benchmarks

    return benchmarks


def _run_peer(script: str, server_url: str, *args: object) -> dict[str, Any]:
    path = PEER_DIR / script
    if not path.exists():
        fail(f"peer script {path} not found (run from a checkout of the repository)")

    async def run() -> dict[str, Any]:
        async with _b().empty_database(server_url) as url:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(path),
                plain_dsn(url),
                *map(str, args),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = await proc.communicate()
            if proc.returncode != 0:
                fail(f"peer {script} failed: {err.decode().strip().splitlines()[-1:]}")
            result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
            return result

    return asyncio.run(run())


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}×" if theirs else "n/a"


def _throughput_rows(
    server: str, jobs: int, workers: int, capacity: int, runs: int, peer: bool
) -> list[list[str]]:
    ours: list[float] = []
    theirs: list[float] = []
    for i in range(runs):
        result = asyncio.run(_b().throughput(server, jobs, workers, capacity))
        ours.append(result.jobs_per_s)
        console.print(f"  run {i + 1}: codity {result.jobs_per_s:,.0f} jobs/s", highlight=False)
        if peer:
            peer_result = _run_peer("peer_pgqueuer.py", server, jobs, workers, capacity)
            theirs.append(float(peer_result["jobs_per_s"]))
            console.print(f"  run {i + 1}: pgqueuer {theirs[-1]:,.0f} jobs/s", highlight=False)
    row = [
        f"throughput ({jobs:,} no-op jobs, {workers} workers × {capacity})",
        f"{_b().median(ours):,.0f} jobs/s (min {min(ours):,.0f}, max {max(ours):,.0f})",
    ]
    if peer:
        row += [
            f"{_b().median(theirs):,.0f} jobs/s (min {min(theirs):,.0f}, max {max(theirs):,.0f})",
            _ratio(_b().median(ours), _b().median(theirs)),
        ]
    return [row]


def _latency_rows(server: str, count: int, rate: float, runs: int, peer: bool) -> list[list[str]]:
    ours: list[Any] = []
    theirs: list[dict[str, Any]] = []
    for i in range(runs):
        ours.append(asyncio.run(_b().latency(server, count, rate)))
        console.print(
            f"  run {i + 1}: codity p50 {ours[-1].p50_ms:.1f} ms, p95 {ours[-1].p95_ms:.1f} ms",
            highlight=False,
        )
        if peer:
            theirs.append(_run_peer("peer_pgqueuer_latency.py", server, count, rate))
            console.print(
                f"  run {i + 1}: pgqueuer p50 {theirs[-1]['p50_ms']:.1f} ms, p95 {theirs[-1]['p95_ms']:.1f} ms",
                highlight=False,
            )
    rows = []
    for label, attr in (("p50", "p50_ms"), ("p95", "p95_ms"), ("p99", "p99_ms")):
        mine = _b().median([getattr(x, attr) for x in ours])
        row = [f"enqueue → start {label} at {rate:.0f}/s ({count} jobs)", f"{mine:.1f} ms"]
        if peer:
            other = _b().median([float(x[attr]) for x in theirs])
            # For latency lower is better: report how many times faster (theirs / ours).
            row += [f"{other:.1f} ms", _ratio(other, mine)]
        rows.append(row)
    return rows


def _engine_rows(server: str, jobs: int, loops: int, batch: int, runs: int) -> list[list[str]]:
    results = []
    for i in range(runs):
        results.append(asyncio.run(_b().engine(server, jobs, loops, batch)).jobs_per_s)
        console.print(f"  run {i + 1}: engine {results[-1]:,.0f} jobs/s", highlight=False)
    return [
        [
            f"engine: core.claim + core.complete ({jobs:,} jobs, {loops} loops, batch {batch})",
            f"{_b().median(results):,.0f} jobs/s (min {min(results):,.0f}, max {max(results):,.0f})",
        ]
    ]


def _enqueue_rows(server: str, jobs: int, runs: int, peer: bool) -> list[list[str]]:
    """Bulk enqueue: core.enqueue_many (beside pgqueuer's bulk enqueue) and `codity enqueue -n`,
    alternating run by run."""
    ours: list[float] = []
    theirs: list[float] = []
    cli: list[float] = []
    walls: list[float] = []
    client_cpu: list[float] = []
    server_cpu: list[float] = []
    for i in range(runs):
        rate = asyncio.run(_b().enqueue_rate(server, jobs))
        ours.append(rate.jobs_per_s)
        client_cpu.append(rate.client_cpu_s)
        if rate.server_cpu_s is not None:
            server_cpu.append(rate.server_cpu_s)
        console.print(
            f"  run {i + 1}: core.enqueue_many {ours[-1]:,.0f} jobs/s "
            f"(CPU: ours {rate.client_cpu_s:.2f} s, server {rate.server_cpu_s or 0:.2f} s)",
            highlight=False,
        )
        if peer:
            theirs.append(float(_run_peer("peer_pgqueuer_enqueue.py", server, jobs)["jobs_per_s"]))
            console.print(f"  run {i + 1}: pgqueuer {theirs[-1]:,.0f} jobs/s", highlight=False)
        result = asyncio.run(_b().cli_enqueue_rate(server, jobs))
        cli.append(result.jobs_per_s)
        walls.append(result.wall_s)
        console.print(
            f"  run {i + 1}: codity enqueue -n {jobs} {cli[-1]:,.0f} jobs/s "
            f"({walls[-1]:.1f} s for the whole command)",
            highlight=False,
        )
    median = _b().median
    cpu = f"; CPU {median(client_cpu):.2f} s ours"
    if server_cpu:
        # What the same enqueue can do on an idle machine: the client's work overlaps the
        # server's (pipelined chunks), so the busier side bounds it.
        bound = jobs / max(median(client_cpu), median(server_cpu))
        cpu += f" + {median(server_cpu):.2f} s server (CPU-bound {bound:,.0f} jobs/s)"
    row = [
        f"bulk enqueue: core.enqueue_many ({jobs:,} jobs, distinct payloads, one call{cpu})",
        f"{median(ours):,.0f} jobs/s (min {min(ours):,.0f}, max {max(ours):,.0f})",
    ]
    if peer:
        row += [
            f"{median(theirs):,.0f} jobs/s (min {min(theirs):,.0f}, max {max(theirs):,.0f})",
            _ratio(median(ours), median(theirs)),
        ]
    cli_row = [
        f"bulk enqueue: `codity enqueue -n {jobs}` (whole command {median(walls):.1f} s)",
        f"{median(cli):,.0f} jobs/s (min {min(cli):,.0f}, max {max(cli):,.0f})",
    ]
    if peer:
        cli_row += ["—", "—"]  # the peer has no command line to compare
    return [row, cli_row]


def _recovery_rows(server: str, runs: int) -> list[list[str]]:
    from codity.cli import bench_recovery as r

    results = []
    for i in range(runs):
        results.append(asyncio.run(r.recovery(server)))
        console.print(
            f"  run {i + 1}: re-run after SIGKILL {results[-1].rerun_ms:.0f} ms, "
            f"drain {results[-1].drain_ms:.0f} ms",
            highlight=False,
        )
    rerun = [x.rerun_ms for x in results]
    drain = [x.drain_ms for x in results]
    return [
        [
            f"re-run after SIGKILL (lease {r.LEASE_MS} ms, tick {r.TICK_MS} ms)",
            f"{_b().median(rerun):,.0f} ms = {_b().median(rerun) / r.LEASE_MS:.2f} leases "
            f"(min {min(rerun):,.0f}, max {max(rerun):,.0f})",
        ],
        [
            f"drain on SIGTERM, a job in flight (grace {r.GRACE_MS} ms)",
            f"{_b().median(drain):,.0f} ms (min {min(drain):,.0f}, max {max(drain):,.0f})",
        ],
    ]


def _tracing_rows(
    server: str, jobs: int, workers: int, capacity: int, runs: int
) -> list[list[str]]:
    """The throughput drain with OpenTelemetry absent, installed but idle, and tracing on;
    alternating, each run in a process of its own (bench/tracing_mode.py)."""
    script = PEER_DIR / "tracing_mode.py"
    if not script.exists():
        fail(f"{script} not found (run from a checkout of the repository)")
    figures: dict[str, list[float]] = {mode: [] for mode in ("absent", "idle", "on")}
    for i in range(runs):
        for mode in figures:
            out = subprocess.run(
                [sys.executable, str(script), mode, server,
                 str(jobs), str(workers), str(capacity)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if out.returncode != 0:
                fail(f"tracing benchmark ({mode}) failed: {out.stderr.strip()[-300:]}")
            figures[mode].append(
                float(json.loads(out.stdout.strip().splitlines()[-1])["jobs_per_s"])
            )
            console.print(f"  run {i + 1}: {mode} {figures[mode][-1]:,.0f} jobs/s", highlight=False)
    median = _b().median
    absent = median(figures["absent"])
    labels = {
        "absent": "tracing: OpenTelemetry absent (no codity[otel])",
        "idle": "tracing: codity[otel] installed, no tracer provider",
        "on": "tracing: on (SDK provider, a span per attempt, spans dropped)",
    }
    return [
        [
            f"{labels[mode]} ({jobs:,} jobs, {workers} workers × {capacity})",
            f"{median(values):,.0f} jobs/s (min {min(values):,.0f}, max {max(values):,.0f})",
            f"{median(values) / absent:.2f}× absent",
        ]
        for mode, values in figures.items()
    ]


def _show(rows: list[list[str]], peer: bool) -> None:
    table = Table(show_header=True, header_style="bold")
    for header in (
        "benchmark",
        "codity (median)",
        *(("pgqueuer (median)", "ratio") if peer else ()),
    ):
        table.add_column(header)
    for row in rows:
        table.add_row(*row)
    console.print(table)


@app.command("throughput")
@friendly_errors
def throughput_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1)] = 20_000,
    workers: Annotated[int, typer.Option("--workers", min=1)] = 2,
    capacity: Annotated[
        int, typer.Option("--capacity", min=1, help="Worker capacity = claim batch.")
    ] = 100,
    runs: RunsOption = 3,
    peer: PeerOption = False,
    dsn: DsnOption = None,
) -> None:
    """Drain N pre-enqueued no-op jobs with W in-process workers."""
    with _server(dsn) as server:
        _show(_throughput_rows(server, jobs, workers, capacity, runs, peer), peer)


@app.command("latency")
@friendly_errors
def latency_command(
    count: Annotated[int, typer.Option("--count", min=10)] = 1000,
    rate: Annotated[float, typer.Option("--rate", min=1)] = 200.0,
    runs: RunsOption = 3,
    peer: PeerOption = False,
    dsn: DsnOption = None,
) -> None:
    """Enqueue → handler-start latency at a fixed enqueue rate, one idle worker."""
    with _server(dsn) as server:
        _show(_latency_rows(server, count, rate, runs, peer), peer)


@app.command("engine")
@friendly_errors
def engine_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1)] = 20_000,
    loops: Annotated[int, typer.Option("--loops", min=1)] = 4,
    batch: Annotated[int, typer.Option("--batch", min=1)] = 500,
    runs: RunsOption = 3,
    dsn: DsnOption = None,
) -> None:
    """claim + complete through codity.core alone: the engine's ceiling without a worker."""
    with _server(dsn) as server:
        _show(_engine_rows(server, jobs, loops, batch, runs), False)


@app.command("enqueue")
@friendly_errors
def enqueue_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1)] = 100_000,
    runs: RunsOption = 3,
    peer: PeerOption = False,
    dsn: DsnOption = None,
) -> None:
    """Bulk enqueue: N jobs through core.enqueue_many, and through `codity enqueue -n N`."""
    with _server(dsn) as server:
        _show(_enqueue_rows(server, jobs, runs, peer), peer)


@app.command("recovery")
@friendly_errors
def recovery_command(runs: RunsOption = 3, dsn: DsnOption = None) -> None:
    """Real worker/scheduler processes: SIGKILL -> the job re-run elsewhere; SIGTERM -> exit."""
    with _server(dsn) as server:
        _show(_recovery_rows(server, runs), False)


@app.command("tracing")
@friendly_errors
def tracing_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1)] = 20_000,
    workers: Annotated[int, typer.Option("--workers", min=1)] = 2,
    capacity: Annotated[int, typer.Option("--capacity", min=1)] = 100,
    runs: RunsOption = 3,
    dsn: DsnOption = None,
) -> None:
    """The worker's hot path with tracing absent, installed but idle, and on (ratios)."""
    with _server(dsn) as server:
        table = Table(show_header=True, header_style="bold")
        for header in ("benchmark", "codity (median)", "vs absent"):
            table.add_column(header)
        for row in _tracing_rows(server, jobs, workers, capacity, runs):
            table.add_row(*(escape(cell) for cell in row))
        console.print(table)


def _console() -> Any:
    """The console's strategies (live events, dashboard reads), imported on use like `_b`."""
    from codity.cli import bench_console

    return bench_console


def _events_rows(
    server: str, streams: int, rate: float, seconds: float, runs: int, cost_runs: int
) -> list[list[str]]:
    rows: list[list[str]] = []
    if cost_runs:
        pairs = []
        for i in range(cost_runs):
            pairs.append(_console().event_cost_run(server, 20_000, 2, 100))
            console.print(
                f"  run {i + 1}: drain with events {pairs[-1][0]:,.0f} jobs/s, "
                f"without {pairs[-1][1]:,.0f} jobs/s",
                highlight=False,
            )
        cost = _console().event_cost(pairs)
        rows.append(
            [
                "live events: drain cost (20,000 no-op jobs, 2 workers × 100, with vs without the triggers)",
                f"{cost.with_events:,.0f} vs {cost.without_events:,.0f} jobs/s: "
                f"{cost.cost_percent:+.1f}% cost",
            ]
        )
    results = []
    for i in range(runs):
        results.append(asyncio.run(_console().fan_out(server, streams, rate, seconds)))
        r = results[-1]
        console.print(
            f"  run {i + 1}: {r.streams} streams, {r.changes_per_s:,.0f} changes/s: "
            f"{r.messages_per_stream_per_s:.1f} msg/s per stream, delay p95 {r.delay_p95_ms:.0f} ms, "
            f"RSS {r.rss_start_mb:.0f} -> {r.rss_end_mb:.0f} MB (max {r.rss_max_mb:.0f}), "
            f"max backlog {r.max_backlog}, resyncs {r.resyncs}",
            highlight=False,
        )
    if results:
        med = _b().median
        rows.append(
            [
                f"live events: {streams} open streams, {rate:,.0f} job changes/s for {seconds:.0f} s",
                f"{med([r.messages_per_stream_per_s for r in results]):.1f} msg/s per stream; "
                f"delivery p50 {med([r.delay_p50_ms for r in results]):.0f} ms, "
                f"p95 {med([r.delay_p95_ms for r in results]):.0f} ms; RSS "
                f"{med([r.rss_start_mb for r in results]):.0f} -> "
                f"{med([r.rss_end_mb for r in results]):.0f} MB "
                f"(max {med([r.rss_max_mb for r in results]):.0f}); "
                f"largest mailbox {max(r.max_backlog for r in results)}",
            ]
        )
    return rows


@app.command("reads")
@friendly_errors
def reads_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1000)] = 1_000_000,
    logs: Annotated[int, typer.Option("--logs", min=0)] = 10_000_000,
    tenants: Annotated[
        int, typer.Option("--tenants", min=1, help="Projects sharing the jobs.")
    ] = 10,
    repeats: Annotated[int, typer.Option("--repeats", min=5)] = 40,
    dsn: DsnOption = None,
) -> None:
    """Every dashboard read (through the API's stores) with JOBS jobs and LOGS log lines in the
    database: p50 and p95 of REPEATS calls each (target: p95 <= 50 ms)."""
    with _server(dsn) as server:
        timings = asyncio.run(_console().dashboard_reads(server, jobs, logs, tenants, repeats))
    table = Table(show_header=True, header_style="bold")
    for header in ("read", "p50", "p95", "<= 50 ms"):
        table.add_column(header)
    for t in timings:
        table.add_row(
            t.read, f"{t.p50_ms:.1f} ms", f"{t.p95_ms:.1f} ms", "yes" if t.p95_ms <= 50 else "NO"
        )
    console.print(table)


@app.command("events")
@friendly_errors
def events_command(
    streams: Annotated[int, typer.Option("--streams", min=1, help="Open event streams.")] = 200,
    rate: Annotated[
        float, typer.Option("--rate", min=100, help="Job state changes per second.")
    ] = 1000.0,
    seconds: Annotated[float, typer.Option("--seconds", min=1)] = 20.0,
    runs: RunsOption = 3,
    cost_runs: Annotated[
        int, typer.Option("--cost-runs", min=0, help="Drains with/without the triggers (0: skip).")
    ] = 3,
    dsn: DsnOption = None,
) -> None:
    """Live events: the drain's cost of the event triggers, and one API process holding N
    streams while jobs change state R times a second (memory sampled every second)."""
    with _server(dsn) as server:
        _show(_events_rows(server, streams, rate, seconds, runs, cost_runs), False)


async def _server_version(server: str) -> str:
    conn = await asyncpg.connect(plain_dsn(server))
    try:
        version: str = await conn.fetchval("SHOW server_version")
        return version
    finally:
        await conn.close()


@app.command("report")
@friendly_errors
def report_command(
    runs: RunsOption = 5,
    dsn: DsnOption = None,
    output: Annotated[Path, typer.Option("--output")] = REPORT_PATH,
) -> None:
    """Run every benchmark beside the peer and write docs/BENCHMARKS.md."""
    with _server(dsn) as server:
        throughput_rows = _throughput_rows(server, 20_000, 2, 100, runs, True)
        latency_rows = _latency_rows(server, 1000, 200.0, max(1, runs // 2), True)
        engine_rows = _engine_rows(server, 20_000, 4, 500, runs)
        recovery_rows = _recovery_rows(server, max(1, runs // 2))
        enqueue_rows = _enqueue_rows(server, 100_000, runs, True)
        tracing_rows = _tracing_rows(server, 20_000, 2, 100, runs)
        events_rows = _events_rows(server, 200, 1000.0, 20.0, max(1, runs // 2), runs)
        pg_version = asyncio.run(_server_version(server))
    _show(throughput_rows + latency_rows + enqueue_rows, True)
    _show(engine_rows + recovery_rows, False)
    machine = (
        f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}, "
        f"PostgreSQL {pg_version} (a throwaway local cluster, fsync off, unless `--dsn` was given). "
        f"Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC."
    )
    output.write_text(
        render_report(
            machine,
            throughput_rows + latency_rows,
            engine_rows,
            runs,
            recovery_rows,
            enqueue_rows=enqueue_rows,
            tracing_rows=tracing_rows,
            events_rows=events_rows,
        )
    )
    console.print(f"[green]wrote[/] {output}")


def render_report(
    machine: str,
    peer_rows: list[list[str]],
    engine_rows: list[list[str]],
    runs: int,
    recovery_rows: list[list[str]] | None = None,
    *,
    enqueue_rows: list[list[str]] | None = None,
    tracing_rows: list[list[str]] | None = None,
    events_rows: list[list[str]] | None = None,
) -> str:
    """docs/BENCHMARKS.md from measured rows. Pure, so a test can re-render the committed file
    from its own figures and catch a hand edit or a template change never regenerated."""
    lines = [
        "# Benchmarks",
        "",
        "Generated by `codity bench report` — do not edit by hand; re-run the command to refresh.",
        f"Machine: {machine}",
        "",
        "Ours and the peer run alternately against the same server, so a noisy neighbour hits both;",
        "figures are medians of the runs, and the ratio is the figure to read (absolute numbers",
        "drift from run to run on shared machines). Ratio > 1 means codity is better: more jobs/s,",
        "or lower latency (peer latency ÷ ours).",
        "",
        "| benchmark | codity (median) | pgqueuer (median) | ratio |",
        "|---|---|---|---|",
        *(f"| {' | '.join(row)} |" for row in peer_rows),
        "",
        "| engine ceiling | codity (median) |",
        "|---|---|",
        *(f"| {' | '.join(row)} |" for row in engine_rows),
        "",
        *(
            [
                "| recovery (real processes) | codity (median) |",
                "|---|---|",
                *(f"| {' | '.join(row)} |" for row in recovery_rows),
                "",
            ]
            if recovery_rows
            else []
        ),
        *(
            [
                "| bulk enqueue | codity (median) | pgqueuer (median) | ratio |",
                "|---|---|---|---|",
                *(f"| {' | '.join(row)} |" for row in enqueue_rows),
                "",
            ]
            if enqueue_rows
            else []
        ),
        *(
            [
                "| tracing (the worker's hot path) | codity (median) | vs absent |",
                "|---|---|---|",
                *(f"| {' | '.join(row)} |" for row in tracing_rows),
                "",
            ]
            if tracing_rows
            else []
        ),
        *(
            [
                "| live events (dashboard) | codity (median) |",
                "|---|---|",
                *(f"| {' | '.join(row)} |" for row in events_rows),
                "",
            ]
            if events_rows
            else []
        ),
        "## How each figure is measured",
        "",
        "- **throughput**: N no-op jobs are enqueued first (`core.enqueue_many`), then W workers start",
        "  (the real `Worker`: producer sized to free slots, executor, batched completer, heartbeat,",
        "  LISTEN/NOTIFY), in one process, as the peer script runs its workers. Timed from starting the",
        "  workers until the database shows every job `completed` — stricter than the peer's clock,",
        "  which stops when its last handler is called.",
        "- **latency**: one idle worker; jobs enqueued one at a time at a fixed rate; the handler",
        "  records `now - enqueue time`. The worker wakes on NOTIFY, not on its poll interval.",
        "- **engine**: `core.claim` + `core.complete` in loops, no handler: the cost of the protocol.",
        *(
            [
                "- **live events** (`codity bench events`): the drain above with the live-events",
                "  triggers and without them (dropped in that run's database), alternating; then the",
                "  API under uvicorn in the benchmark's process with N event streams open on one",
                "  project while jobs change state R times a second (enqueue batches of 100): messages",
                "  per stream per second, delivery delay, the largest mailbox, and the process's RSS",
                "  sampled every second (flat = bounded memory).",
            ]
            if events_rows
            else []
        ),
        *(
            [
                "- **recovery** (`codity bench recovery`): two `codity worker` processes and a",
                "  `codity scheduler`; the worker running a long job is SIGKILLed, timed until the job is",
                "  leased again by the other worker (floor: the lease plus up to one tick); then that",
                "  worker gets SIGTERM, timed until it has exited (floor: the grace period). No peer",
                "  column: pgqueuer has no leases to compare.",
            ]
            if recovery_rows
            else []
        ),
        *(
            [
                "- **bulk enqueue** (`codity bench enqueue`): 100,000 jobs with distinct small payloads",
                "  through one `core.enqueue_many` call (the NewJob objects built before the clock",
                "  starts), beside pgqueuer's `Queries.enqueue` in chunks of 5,000 on the same server;",
                "  and `codity enqueue bench noop -n 100000` in its own process: the rate it prints (the",
                "  enqueue), with the whole command's wall time (Python start-up included) in the label.",
                "  The label also gives the CPU seconds our process and its PostgreSQL backend spent",
                "  (getrusage, /proc): independent of the machine's other load, and the rate they bound",
                "  when the machine is idle (chunks are pipelined, so the busier side sets the pace).",
            ]
            if enqueue_rows
            else []
        ),
        *(
            [
                "- **tracing** (`codity bench tracing`): the throughput drain, each run in a process of",
                "  its own, with OpenTelemetry absent (its import blocked, as without `codity[otel]`),",
                "  installed but without a tracer provider, and on (the SDK, a span per attempt, spans",
                "  dropped by the exporter); alternating. Absent vs idle shows the hooks cost nothing",
                "  measurable; on shows what tracing costs when wanted.",
            ]
            if tracing_rows
            else []
        ),
        "",
        f"Regenerate: `codity bench report --runs {runs}` (about five minutes).",
        "",
    ]
    return "\n".join(lines)
