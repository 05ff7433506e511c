"""`codity bench`: measure throughput, latency and the engine's ceiling, beside the peer.

Figures are medians of several runs. With `--peer`, each of our runs is followed by a run of
pgqueuer (the fastest Python peer) against the same server, so the noise of a shared machine
falls on both and the ratio means something. `codity bench report` writes docs/BENCHMARKS.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import asyncpg
import typer
from rich.markup import escape
from rich.table import Table

from codity.cli._common import console, fail, friendly_errors
from codity.cli._loop import run
from codity.cli.bench_report import Section, render_report
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
def bench_server(dsn: str | None) -> Iterator[str]:
    """The server a benchmark runs on: `dsn`'s (its `postgres` database), or a throwaway
    cluster started for it and stopped after. `codity bench` and the scripts in bench/ use it."""
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

    async def peer() -> dict[str, Any]:
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

    return run(peer())


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}×" if theirs else "n/a"


def _throughput_rows(
    server: str, jobs: int, workers: int, capacity: int, runs: int, peer: bool
) -> list[list[str]]:
    ours: list[float] = []
    theirs: list[float] = []
    our_cpu: list[Any] = []
    their_cpu: list[Any] = []
    for i in range(runs):
        result = run(_b().throughput(server, jobs, workers, capacity))
        ours.append(result.jobs_per_s)
        if result.cpu is not None:
            our_cpu.append(result.cpu)
        console.print(f"  run {i + 1}: codity {result.jobs_per_s:,.0f} jobs/s", highlight=False)
        if peer:
            peer_result = _run_peer("peer_pgqueuer.py", server, jobs, workers, capacity)
            theirs.append(float(peer_result["jobs_per_s"]))
            if "busy_s" in peer_result:
                their_cpu.append(
                    _b().CpuUse(
                        float(peer_result["seconds"]),
                        int(peer_result["jobs"]),
                        float(peer_result["busy_s"]),
                        float(peer_result["workers_s"]),
                    )
                )
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
    rows = [row]
    if our_cpu and (their_cpu or not peer):
        cpu_row = [
            "CPU per job in that drain: PostgreSQL + workers (cores busy)",
            _cpu_per_job(our_cpu),
        ]
        if peer:
            cpu_row += [_cpu_per_job(their_cpu), _ratio(_cpu_total(their_cpu), _cpu_total(our_cpu))]
        rows.append(cpu_row)
    return rows


def _cpu_total(cpus: list[Any]) -> float:
    """The median of the runs' CPU per job, PostgreSQL and workers together (µs)."""
    return float(_b().median([c.server_us_per_job + c.workers_us_per_job for c in cpus]))


def _cpu_split(cpus: list[Any]) -> str:
    """The runs' median CPU per job (`benchmarks.CpuUse`), PostgreSQL + workers."""
    median = _b().median
    server = median([c.server_us_per_job for c in cpus])
    return f"{server:.0f} + {median([c.workers_us_per_job for c in cpus]):.0f} µs"


def _cores_busy(cpus: list[Any]) -> str:
    return f"{_b().median([c.busy_cores for c in cpus]):.2f}"


def _cpu_per_job(cpus: list[Any]) -> str:
    return f"{_cpu_split(cpus)} ({_cores_busy(cpus)} cores)"


def _latency_rows(server: str, count: int, rate: float, runs: int, peer: bool) -> list[list[str]]:
    ours: list[Any] = []
    theirs: list[dict[str, Any]] = []
    for i in range(runs):
        ours.append(run(_b().latency(server, count, rate)))
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


def _engine_rows(
    server: str, jobs: int, loops: int, batch: int, runs: int, ceiling: bool = True
) -> list[list[str]]:
    """The engine (core.claim + core.complete) and, alternating with it, the raw-SQL ceiling
    with the same loops and batch; the share of the ceiling is the figure to read."""
    median = _b().median
    engine: list[float] = []
    raw: list[float] = []
    for i in range(runs):
        engine.append(run(_b().engine(server, jobs, loops, batch)).jobs_per_s)
        console.print(f"  run {i + 1}: engine {engine[-1]:,.0f} jobs/s", highlight=False)
        if ceiling:
            raw.append(run(_b().ceiling(server, jobs, loops, batch)).jobs_per_s)
            console.print(f"  run {i + 1}: ceiling {raw[-1]:,.0f} jobs/s", highlight=False)
    rows = [
        [
            f"engine: core.claim + core.complete ({jobs:,} jobs, {loops} loops, batch {batch})",
            _spread(engine),
            f"{median(engine) / median(raw):.0%}" if raw else "",
        ]
    ]
    if raw:
        rows.append(
            [
                "ceiling: minimal claim + complete + execution row SQL (same loops, batch)",
                _spread(raw),
                "100%",
            ]
        )
    return rows


def _spread(values: list[float], unit: str = "jobs/s") -> str:
    median = _b().median(values)
    return f"{median:,.0f} {unit} (min {min(values):,.0f}, max {max(values):,.0f})"


PROCESSES_COLUMNS = [
    "drain",
    "codity (median)",
    "vs the first processes row",
    f"cores busy (of {os.cpu_count()})",
    "CPU per job: PostgreSQL + workers",
    "every core busy at that cost",
]


def _cpu_cells(cpus: list[Any]) -> list[str]:
    """The median CPU figures of a drain's runs (`benchmarks.CpuUse`), or n/a without them."""
    if not cpus:
        return ["n/a", "n/a", "n/a"]
    cores = os.cpu_count() or 1
    bound = _b().median([c.bound_jobs_per_s(cores) for c in cpus])
    return [_cores_busy(cpus), _cpu_split(cpus), f"{bound:,.0f} jobs/s"]


def _processes_rows(
    server: str, jobs: int, processes: list[int], capacity: int, runs: int, workers: int = 2
) -> list[list[str]]:
    """Throughput with 1, 2, 4... worker processes (separate OS processes), alternating, and
    the in-process drain of the peer row (`workers` × `capacity` in this process), each with
    where its CPU went: whether one process already keeps every core busy decides how much
    more processes can add on this machine."""
    # each drain's label -> a call that makes a coroutine of one run of it
    drains: dict[str, Callable[[], Any]] = {
        f"{workers} workers × capacity {capacity} in one process (the peer row's drain)": (
            functools.partial(_b().throughput, server, jobs, workers, capacity)
        )
    }
    for n in processes:
        drains[f"{n} worker process{'es' if n > 1 else ''} × capacity {capacity}"] = (
            functools.partial(_b().throughput_processes, server, jobs, n, capacity)
        )
    labels = list(drains)
    results: dict[str, list[float]] = {label: [] for label in labels}
    cpus: dict[str, list[Any]] = {label: [] for label in labels}
    for i in range(runs):
        for label, drain in drains.items():
            r = run(drain())
            results[label].append(r.jobs_per_s)
            if r.cpu is not None:
                cpus[label].append(r.cpu)
            console.print(f"  run {i + 1}: {label} {r.jobs_per_s:,.0f} jobs/s", highlight=False)
    base = _b().median(results[labels[1]])
    return [
        [
            f"{label} ({jobs:,} jobs)",
            _spread(results[label]),
            f"{_b().median(results[label]) / base:.2f}×",
            *_cpu_cells(cpus[label]),
        ]
        for label in labels
    ]


def _history_rows(
    server: str, jobs: int, workers: int, capacity: int, finished: int, runs: int
) -> list[list[str]]:
    """The throughput drain on empty tables and with `finished` completed jobs (and their
    execution rows) already present, alternating."""

    async def with_template() -> tuple[list[float], list[float]]:
        empty: list[float] = []
        full: list[float] = []
        console.print(f"  filling a template with {finished:,} finished jobs...", highlight=False)
        async with _b().history_template(server, finished) as template:
            for i in range(runs):
                empty.append((await _b().throughput(server, jobs, workers, capacity)).jobs_per_s)
                console.print(f"  run {i + 1}: empty {empty[-1]:,.0f} jobs/s", highlight=False)
                r = await _b().throughput(server, jobs, workers, capacity, template=template)
                full.append(r.jobs_per_s)
                console.print(f"  run {i + 1}: history {full[-1]:,.0f} jobs/s", highlight=False)
        return empty, full

    empty, full = run(with_template())
    median = _b().median
    return [
        [f"drain of {jobs:,} jobs, empty tables", _spread(empty), "1.00×"],
        [
            f"drain of {jobs:,} jobs, {finished:,} finished jobs + execution rows present",
            _spread(full),
            f"{median(full) / median(empty):.2f}×",
        ],
    ]


def _xmin_rows(
    server: str, seconds: float, rate: float, workers: int, capacity: int, runs: int
) -> list[list[str]]:
    """Steady enqueue + drain, free and with a REPEATABLE READ transaction held open,
    alternating."""
    free: list[Any] = []
    held: list[Any] = []
    for i in range(runs):
        for hold, into in ((False, free), (True, held)):
            r = run(
                _b().steady(
                    server,
                    seconds=seconds,
                    rate=rate,
                    workers=workers,
                    capacity=capacity,
                    hold_snapshot=hold,
                )
            )
            into.append(r)
            console.print(
                f"  run {i + 1}: {'held snapshot' if hold else 'free'} {r.jobs_per_s:,.0f} jobs/s, "
                f"p50 {r.p50_ms:.1f} ms, p99 {r.p99_ms:.1f} ms, {r.dead_tuples:,} dead tuples",
                highlight=False,
            )
    median = _b().median

    def row(label: str, runs_: list[Any]) -> list[str]:
        return [
            label,
            f"{median([r.jobs_per_s for r in runs_]):,.0f} jobs/s",
            f"{median([r.p50_ms for r in runs_]):.1f} ms",
            f"{median([r.p99_ms for r in runs_]):.1f} ms",
            f"{median([r.dead_tuples for r in runs_]):,.0f}",
        ]

    tp = median([r.jobs_per_s for r in held]) / median([r.jobs_per_s for r in free])
    p99 = median([r.p99_ms for r in held]) / median([r.p99_ms for r in free])
    return [
        row(f"{seconds:.0f} s at {rate:,.0f}/s, nothing else running", free),
        row(f"{seconds:.0f} s at {rate:,.0f}/s, REPEATABLE READ transaction held open", held),
        ["held ÷ free", f"{tp:.2f}×", "", f"{p99:.1f}×", ""],
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
        rate = run(_b().enqueue_rate(server, jobs))
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
        result = run(_b().cli_enqueue_rate(server, jobs))
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
        results.append(run(r.recovery(server)))
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


def _flow_rows(
    server: str,
    jobs: int,
    workers: int,
    capacity: int,
    runs: int,
    mechanisms: list[str] | None = None,
) -> list[list[str]]:
    """Each flow-control mechanism on vs off, the throughput drain alternating (bench_flow).
    The cost is the median of the runs' on/off ratios: each ratio compares two drains run one
    after the other, so a noisy neighbour weighs on both of a pair."""
    from codity.cli import bench_flow as f

    rows = []
    for mechanism in mechanisms or f.MECHANISMS:
        pairs = []
        for i in range(runs):
            pairs.append(
                run(f.pair(server, mechanism, jobs, workers, capacity, on_first=i % 2 == 0))
            )
            console.print(
                f"  {mechanism} run {i + 1}: on {pairs[-1].on.jobs_per_s:,.0f} jobs/s, "
                f"off {pairs[-1].off.jobs_per_s:,.0f} jobs/s",
                highlight=False,
            )
        ratios = [p.on.jobs_per_s / p.off.jobs_per_s for p in pairs]
        rows.append(
            [
                f"{mechanism} ({jobs:,} no-op jobs, {workers} workers × {capacity})",
                f"{_b().median([p.on.jobs_per_s for p in pairs]):,.0f} jobs/s",
                f"{_b().median([p.off.jobs_per_s for p in pairs]):,.0f} jobs/s",
                f"{_b().median(ratios):.2f}× (runs {min(ratios):.2f}–{max(ratios):.2f})",
            ]
        )
    return rows


def _plain_claim_row(server: str, jobs: int, runs: int) -> list[str]:
    """The plain claim (a queue with none of the mechanisms set) beside claim_jobs_flow making
    the same claim (bench_flow.plain_claims); the figure is the median of the runs' ratios."""
    from codity.cli import bench_flow as f

    plain, flow, ratios = [], [], []
    for i in range(runs):
        times = run(f.plain_claims(server, jobs))
        plain.append(_b().median(times.plain))
        flow.append(_b().median(times.flow))
        ratios.append(flow[-1] / plain[-1])  # speed: the plain claim's claims per second ÷ flow's
        console.print(
            f"  plain claim run {i + 1}: claim_jobs {plain[-1]:.3f} ms, "
            f"claim_jobs_flow {flow[-1]:.3f} ms",
            highlight=False,
        )
    return [
        f"plain claim, none set: claim_jobs (off: claim_jobs_flow in its place; claims of "
        f"{f.PLAIN_LIMIT} from {jobs:,} queued, {f.PLAIN_CLAIMS} of each, alternating)",
        f"{_b().median(plain):.2f} ms a claim",
        f"{_b().median(flow):.2f} ms a claim",
        f"{_b().median(ratios):.2f}× (runs {min(ratios):.2f}–{max(ratios):.2f})",
    ]


FLOW_COLUMNS = ["flow control (the drain)", "on (median)", "off (median)", "on ÷ off"]


#: Attempts the tracing micro-benchmark times per variant.
TRACING_MICRO_CALLS = 200_000
TRACING_MODES = ("hookless", "absent", "idle", "on")
TRACING_COLUMNS = ["tracing", "codity (median)", "vs hooks removed"]


def _tracing_script() -> Path:
    script = PEER_DIR / "tracing_mode.py"
    if not script.exists():
        fail(f"{script} not found (run from a checkout of the repository)")
    return script


def _tracing_run(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(_tracing_script()), *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        fail(f"tracing benchmark ({args[0]}) failed: {out.stderr.strip()[-300:]}")
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def _tracing_rows(
    server: str, jobs: int, workers: int, capacity: int, runs: int
) -> list[list[str]]:
    """The throughput drain with the tracing hooks removed, OpenTelemetry absent (the hooks
    there, off), installed but idle, and tracing on, each run in a process of its own
    (bench/tracing_mode.py), the order rotating from run to run; then the micro-benchmark of
    the hooks' cost per call with OpenTelemetry absent."""
    figures: dict[str, list[float]] = {mode: [] for mode in TRACING_MODES}
    for i in range(runs):
        order = TRACING_MODES[i % len(TRACING_MODES) :] + TRACING_MODES[: i % len(TRACING_MODES)]
        for mode in order:
            result = _tracing_run(mode, server, str(jobs), str(workers), str(capacity))
            figures[mode].append(float(result["jobs_per_s"]))
            console.print(f"  run {i + 1}: {mode} {figures[mode][-1]:,.0f} jobs/s", highlight=False)
    micro = _tracing_run("micro", str(TRACING_MICRO_CALLS))
    console.print(
        f"  micro: {micro['hook_ns']:.0f} ns per attempt, "
        f"{micro['traceparent_ns']:.0f} ns per enqueue call",
        highlight=False,
    )
    median = _b().median
    baseline = median(figures["hookless"])
    labels = {
        "hookless": "tracing: hooks removed (OpenTelemetry absent, run_attempt bypassed)",
        "absent": "tracing: OpenTelemetry absent (no codity[otel]), hooks in place",
        "idle": "tracing: codity[otel] installed, no tracer provider",
        "on": "tracing: on (SDK provider, a span per attempt, spans dropped)",
    }
    rows = [
        [
            f"{labels[mode]} ({jobs:,} jobs, {workers} workers × {capacity})",
            f"{median(values):,.0f} jobs/s (min {min(values):,.0f}, max {max(values):,.0f})",
            f"{median(values) / baseline:.2f}× hooks removed",
        ]
        for mode, values in figures.items()
    ]
    per_job_ns = 1e9 / median(figures["absent"])
    rows.append(
        [
            f"tracing hooks with OpenTelemetry absent, per call (micro-benchmark, "
            f"{TRACING_MICRO_CALLS:,} no-op attempts each way)",
            f"{micro['hook_ns']:.0f} ns per attempt ({micro['with_hook_ns']:.0f} vs "
            f"{micro['hookless_ns']:.0f} ns); {micro['traceparent_ns']:.0f} ns per enqueue call",
            f"{micro['hook_ns'] / per_job_ns:.2%} of a job at the absent drain's rate",
        ]
    )
    return rows


def _show_table(headers: list[str], rows: list[list[str]]) -> None:
    table = Table(show_header=True, header_style="bold")
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*row)
    console.print(table)


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
    processes: Annotated[
        list[int] | None,
        typer.Option(
            "--processes",
            min=1,
            help="Run the workers as N separate `codity worker` processes instead (repeat for "
            "a curve: --processes 1 --processes 2 --processes 4).",
        ),
    ] = None,
    runs: RunsOption = 3,
    peer: PeerOption = False,
    dsn: DsnOption = None,
) -> None:
    """Drain N pre-enqueued no-op jobs with W in-process workers (or N worker processes)."""
    with bench_server(dsn) as server:
        if processes:
            rows = _processes_rows(server, jobs, sorted(set(processes)), capacity, runs, workers)
            _show_table(PROCESSES_COLUMNS, rows)
            return
        _show(_throughput_rows(server, jobs, workers, capacity, runs, peer), peer)


@app.command("latency")
@friendly_errors
def latency_command(
    count: Annotated[int, typer.Option("--count", min=10)] = 1000,
    rate: Annotated[
        list[float] | None,
        typer.Option("--rate", min=1, help="Jobs enqueued per second (repeat for several)."),
    ] = None,
    runs: RunsOption = 3,
    peer: PeerOption = False,
    dsn: DsnOption = None,
) -> None:
    """Enqueue → handler-start latency at a fixed enqueue rate, one idle worker."""
    with bench_server(dsn) as server:
        rows = []
        for r in rate or [200.0]:
            rows += _latency_rows(server, max(count, int(r)), r, runs, peer)
        _show(rows, peer)


@app.command("engine")
@friendly_errors
def engine_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1)] = 20_000,
    loops: Annotated[int, typer.Option("--loops", min=1)] = 4,
    batch: Annotated[int, typer.Option("--batch", min=1)] = 100,
    runs: RunsOption = 3,
    dsn: DsnOption = None,
) -> None:
    """claim + complete through codity.core alone, beside the raw-SQL ceiling (same run)."""
    with bench_server(dsn) as server:
        _show_table(
            ["benchmark", "codity (median)", "share of ceiling"],
            _engine_rows(server, jobs, loops, batch, runs),
        )


@app.command("ceiling")
@friendly_errors
def ceiling_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1)] = 20_000,
    loops: Annotated[int, typer.Option("--loops", min=1)] = 4,
    batch: Annotated[int, typer.Option("--batch", min=1)] = 100,
    runs: RunsOption = 3,
    dsn: DsnOption = None,
) -> None:
    """The minimal claim + complete + execution-row SQL on this machine: the ceiling."""
    with bench_server(dsn) as server:
        results = [run(_b().ceiling(server, jobs, loops, batch)).jobs_per_s for _ in range(runs)]
        _show_table(["benchmark", "median"], [["ceiling (raw SQL)", _spread(results)]])


@app.command("history")
@friendly_errors
def history_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1)] = 20_000,
    finished: Annotated[
        int, typer.Option("--finished", min=1, help="Finished jobs already in the tables.")
    ] = 1_000_000,
    workers: Annotated[int, typer.Option("--workers", min=1)] = 2,
    capacity: Annotated[int, typer.Option("--capacity", min=1)] = 100,
    runs: RunsOption = 3,
    dsn: DsnOption = None,
) -> None:
    """The throughput drain with a million finished jobs (and their executions) vs empty."""
    with bench_server(dsn) as server:
        _show_table(
            ["drain", "codity (median)", "vs empty"],
            _history_rows(server, jobs, workers, capacity, finished, runs),
        )


@app.command("xmin")
@friendly_errors
def xmin_command(
    seconds: Annotated[float, typer.Option("--seconds", min=1)] = 60.0,
    rate: Annotated[float, typer.Option("--rate", min=1)] = 3000.0,
    workers: Annotated[int, typer.Option("--workers", min=1)] = 2,
    capacity: Annotated[int, typer.Option("--capacity", min=1)] = 100,
    runs: RunsOption = 3,
    dsn: DsnOption = None,
) -> None:
    """Steady enqueue + drain with vs without a long REPEATABLE READ transaction open."""
    with bench_server(dsn) as server:
        _show_table(
            ["run", "throughput", "enqueue → start p50", "p99", "dead tuples in jobs"],
            _xmin_rows(server, seconds, rate, workers, capacity, runs),
        )


@app.command("enqueue")
@friendly_errors
def enqueue_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1)] = 100_000,
    runs: RunsOption = 3,
    peer: PeerOption = False,
    dsn: DsnOption = None,
) -> None:
    """Bulk enqueue: N jobs through core.enqueue_many, and through `codity enqueue -n N`."""
    with bench_server(dsn) as server:
        _show(_enqueue_rows(server, jobs, runs, peer), peer)


@app.command("recovery")
@friendly_errors
def recovery_command(runs: RunsOption = 3, dsn: DsnOption = None) -> None:
    """Real worker/scheduler processes: SIGKILL -> the job re-run elsewhere; SIGTERM -> exit."""
    with bench_server(dsn) as server:
        _show(_recovery_rows(server, runs), False)


async def _server_version(server: str) -> str:
    conn = await asyncpg.connect(plain_dsn(server))
    try:
        version: str = await conn.fetchval("SHOW server_version")
        return version
    finally:
        await conn.close()


@app.command("tracing")
@friendly_errors
def tracing_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1)] = 20_000,
    workers: Annotated[int, typer.Option("--workers", min=1)] = 2,
    capacity: Annotated[int, typer.Option("--capacity", min=1)] = 100,
    runs: RunsOption = 3,
    dsn: DsnOption = None,
) -> None:
    """The worker's drain with the tracing hooks removed, OpenTelemetry absent, installed but
    idle, and on (ratios to the first), and the hooks' own cost per call (micro-benchmark)."""
    with bench_server(dsn) as server:
        table = Table(show_header=True, header_style="bold")
        for header in ("benchmark", *TRACING_COLUMNS[1:]):
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
                f"  run {i + 1}: drain watched {pairs[-1][0]:,.0f} jobs/s, "
                f"nobody watching {pairs[-1][1]:,.0f} jobs/s",
                highlight=False,
            )
        cost = _console().event_cost(pairs)
        rows.append(
            [
                "live events: drain cost (20,000 no-op jobs, 2 workers × 100, a dashboard watching vs nobody)",
                f"{cost.with_events:,.0f} vs {cost.without_events:,.0f} jobs/s: "
                f"{cost.cost_percent:+.1f}% cost",
            ]
        )
    results = []
    for i in range(runs):
        results.append(run(_console().fan_out(server, streams, rate, seconds)))
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


def _reads_rows(server: str, jobs: int, logs: int, tenants: int, repeats: int) -> list[list[str]]:
    timings = asyncio.run(_console().dashboard_reads(server, jobs, logs, tenants, repeats))
    return [
        [t.read, f"{t.p50_ms:.1f} ms", f"{t.p95_ms:.1f} ms", "yes" if t.p95_ms <= 50 else "NO"]
        for t in timings
    ]


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
    with bench_server(dsn) as server:
        _show_table(READS_COLUMNS, _reads_rows(server, jobs, logs, tenants, repeats))


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
        int, typer.Option("--cost-runs", min=0, help="Drains watched/unwatched (0: skip).")
    ] = 3,
    dsn: DsnOption = None,
) -> None:
    """Live events: the drain's cost of a watching dashboard, and one API process holding N
    streams while jobs change state R times a second (memory sampled every second)."""
    with bench_server(dsn) as server:
        _show(_events_rows(server, streams, rate, seconds, runs, cost_runs), False)


@app.command("flow")
@friendly_errors
def flow_command(
    jobs: Annotated[int, typer.Option("--jobs", min=1)] = 20_000,
    workers: Annotated[int, typer.Option("--workers", min=1)] = 2,
    capacity: Annotated[int, typer.Option("--capacity", min=1)] = 100,
    runs: RunsOption = 5,
    mechanism: Annotated[
        list[str] | None,
        typer.Option(
            "--mechanism",
            help="Only this one (repeatable): 'fair shares', 'key limit', 'rate limit', "
            "'plain claim'.",
        ),
    ] = None,
    dsn: DsnOption = None,
) -> None:
    """Flow control's cost: the drain with fair shares / a key limit / a rate limit on vs off,
    and the plain claim (none set) beside the flow statement making the same claim."""
    from codity.cli.bench_flow import MECHANISMS, PLAIN_CLAIM

    unknown = [m for m in mechanism or [] if m not in (*MECHANISMS, PLAIN_CLAIM)]
    if unknown:
        fail(f"unknown mechanism {unknown[0]!r}; one of: {', '.join((*MECHANISMS, PLAIN_CLAIM))}")
    drains = [m for m in mechanism or MECHANISMS if m != PLAIN_CLAIM]
    with bench_server(dsn) as server:
        rows = _flow_rows(server, jobs, workers, capacity, runs, drains) if drains else []
        if not mechanism or PLAIN_CLAIM in mechanism:
            rows.append(_plain_claim_row(server, jobs, runs))
        _show_table(FLOW_COLUMNS, rows)


@app.command("report")
@friendly_errors
def report_command(
    runs: RunsOption = 3,
    dsn: DsnOption = None,
    output: Annotated[Path, typer.Option("--output")] = REPORT_PATH,
    xmin_seconds: Annotated[
        float, typer.Option("--xmin-seconds", min=1, help="Length of each xmin run.")
    ] = 60.0,
) -> None:
    """Run every benchmark (beside the peer where there is one) and write docs/BENCHMARKS.md."""
    with bench_server(dsn) as server:
        sections = [
            Section(
                "Beside the peer (pgqueuer)",
                f"codity bench throughput --peer / latency --rate 200 --rate 2000 --peer / "
                f"enqueue --peer, --runs {runs}",
                ["benchmark", "codity (median)", "pgqueuer (median)", "ratio"],
                _throughput_rows(server, 20_000, 2, 100, runs, True)
                + _latency_rows(server, 1000, 200.0, runs, True)
                + _latency_rows(server, 4000, 2000.0, runs, True)
                + _enqueue_rows(server, 100_000, runs, True),
                THROUGHPUT_NOTES,
            ),
            Section(
                "Worker processes",
                f"codity bench throughput --processes 1 --processes 2 --processes 4 --runs {runs}",
                PROCESSES_COLUMNS,
                _processes_rows(server, 20_000, [1, 2, 4], 100, runs),
                PROCESSES_NOTES,
            ),
            Section(
                "The engine beside the ceiling",
                f"codity bench engine --runs {runs} (engine and ceiling alternate)",
                ["benchmark", "median", "share of ceiling"],
                _engine_rows(server, 20_000, 4, 100, runs),
                ENGINE_NOTES,
            ),
            Section(
                "History",
                f"codity bench history --runs {runs}",
                ["drain", "codity (median)", "vs empty"],
                _history_rows(server, 20_000, 2, 100, 1_000_000, runs),
                HISTORY_NOTES,
            ),
            Section(
                "A long transaction (the xmin horizon)",
                f"codity bench xmin --seconds {xmin_seconds:.0f} --runs {runs}",
                ["run", "throughput", "enqueue → start p50", "p99", "dead tuples in jobs"],
                _xmin_rows(server, xmin_seconds, 3000.0, 2, 100, runs),
                XMIN_NOTES,
            ),
            Section(
                "Tracing (the worker's hot path)",
                f"codity bench tracing --runs {runs}",
                TRACING_COLUMNS,
                _tracing_rows(server, 20_000, 2, 100, runs),
                TRACING_NOTES,
            ),
            Section(
                "Live events (dashboard)",
                f"codity bench events --runs {max(1, runs // 2)}",
                ["live events", "codity (median)"],
                _events_rows(server, 200, 1000.0, 20.0, max(1, runs // 2), runs),
                EVENTS_NOTES,
            ),
            Section(
                "Dashboard reads",
                "codity bench reads --jobs 1000000 --logs 10000000 --tenants 10 --repeats 40",
                READS_COLUMNS,
                _reads_rows(server, 1_000_000, 10_000_000, 10, 40),
                READS_NOTES,
            ),
            Section(
                "Flow control: each mechanism on vs off",
                f"codity bench flow --runs {runs}",
                FLOW_COLUMNS,
                [*_flow_rows(server, 20_000, 2, 100, runs), _plain_claim_row(server, 20_000, runs)],
                FLOW_NOTES,
            ),
            Section(
                "Recovery (real processes)",
                f"codity bench recovery --runs {max(1, runs // 2)}",
                ["recovery", "codity (median)"],
                _recovery_rows(server, max(1, runs // 2)),
                RECOVERY_NOTES,
            ),
        ]
        pg_version = run(_server_version(server))
    for section in sections:
        console.print(f"[bold]{section.title}[/]")
        _show_table(section.columns, section.rows)
    machine = (
        f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}, "
        f"PostgreSQL {pg_version} (a throwaway local cluster, fsync off, unless `--dsn` was given). "
        f"Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC."
    )
    output.write_text(render_report(machine, sections, runs))
    console.print(f"[green]wrote[/] {output}")


FLOW_NOTES = [
    "- **flow control** (`codity bench flow`): the throughput drain in a fresh database, once with",
    "  the mechanism on and once off, alternating which goes first; the cost is the median of the",
    "  runs' on ÷ off. Fair shares: two projects with a queue and half the jobs each, served by the",
    "  same workers (WORKER_FAIR_SHARES on vs off). Key limit: every job has one of 1,000",
    "  concurrency keys; the queue allows 10 per key (far more than a key ever has running) vs no",
    "  limit. Rate limit: 1,000,000 starts a second (far above the drain rate) vs none. Room to",
    "  spare, so the figure is the mechanism's own cost, not its limiting.",
    "- **plain claim** (none of them set): the claim before flow control cannot run beside",
    "  today's in one version of the code, so this row measures what keeping the mechanisms out",
    "  of it buys. A queue with no key or rate limit is claimed by `claim_jobs`, which only leaves",
    "  flow-controlled queues out (a filter and a count over the worker's few queue rows, no job",
    "  rows); `claim_jobs_flow` carries every mechanism's steps. Both make the same claim (100",
    "  from 20,000 queued, rolled back so every claim sees the same jobs), prepared as the worker",
    "  runs them (the flow statement with its kept generic plan), alternating which goes first;",
    "  timed from the client (the same round trip in both). On = `claim_jobs`, off =",
    "  `claim_jobs_flow`; on ÷ off is the speed ratio (the flow statement's time ÷ the plain",
    "  claim's): above 1, the plain claim is that much faster than the one statement for both",
    "  would be; below 1, the flow statement with its kept plan beats the plain claim, which is",
    "  planned on every execution. Not a drain: the claim statement alone. The drains above and",
    "  every other section run the plain claim as it is today.",
]

THROUGHPUT_NOTES = [
    "- **throughput**: N no-op jobs are enqueued first (`core.enqueue_many`), then W workers start",
    "  (the real `Worker`: producer sized to free slots, executor, batched completer, heartbeat,",
    "  LISTEN/NOTIFY), in one process, as the peer script runs its workers. Timed from starting the",
    "  workers until the database shows every job `completed` — stricter than the peer's clock,",
    "  which stops when its last handler is called. The benchmark's process takes the garbage",
    "  collector settings `codity worker` runs with (`codity.worker.gc_tuning`: start-up objects",
    "  frozen, young collections every 10,000 allocations); the peer runs with Python's defaults.",
    "- **CPU per job in that drain**: over the same window on both sides (the peer's script reads",
    "  the same counters), the machine's busy CPU time (/proc/stat) less the workers' process's own",
    "  (PostgreSQL, and anything else the machine ran), then the workers' process's own, per job;",
    "  in brackets, the cores busy. The ratio is the peer's CPU per job ÷ ours (above 1: ours",
    "  costs less).",
    "- **latency**: one idle worker; jobs enqueued one at a time at a fixed rate (paced by the",
    "  schedule, both sides; each side enqueues on one connection it holds, as the peer's script",
    "  does); the handler records `now - enqueue time`. The worker wakes on NOTIFY.",
    "- **bulk enqueue**: 100,000 jobs through one `core.enqueue_many` call beside pgqueuer's bulk",
    "  enqueue, and `codity enqueue -n 100000` as a user runs it.",
]
PROCESSES_NOTES = [
    "Separate `codity worker` processes (capacity 100 each) drain 20,000 pre-enqueued no-op jobs;",
    "the queue is paused while they start, and the clock runs from the resume until every job is",
    "completed. PostgreSQL shares the same cores. The first row is the peer row's drain (2",
    "workers × 100 in one process), run in the same rotation.",
    "- **cores busy**: the machine's busy CPU time over the timed window (/proc/stat: every",
    "  process, so anything else the machine ran meanwhile too) ÷ the window.",
    "- **CPU per job**: the worker processes' own CPU time (/proc/PID/stat; the benchmark's process",
    "  for the first row) per job, and the rest of the machine's busy time per job: PostgreSQL's",
    "  backends, autovacuum and the WAL writer, and the benchmark's polling (small).",
    "- **every core busy at that cost**: the cores ÷ the CPU per job, the drain's ceiling on this",
    "  machine at its CPU cost: more worker processes can add at most the idle part.",
]
ENGINE_NOTES = [
    "- **engine**: `core.claim` + `core.complete` in 4 loops (a connection each), batch 100, no",
    "  handler: the cost of the protocol (fencing, execution rows, dependants step, lifecycle",
    "  trigger, foreign keys).",
    "- **ceiling**: the minimal SQL any PostgreSQL queue runs per batch (SKIP LOCKED claim on a",
    "  matching partial index, completion, one execution row), on tables of its own, same loops.",
]
HISTORY_NOTES = [
    "The throughput drain (20,000 jobs, 2 workers × 100) on a database copied from a template",
    "(a file copy, before the clock starts) that holds 1,000,000 completed jobs and their",
    "execution rows, beside the same drain on empty tables. The history is made by the engine,",
    "as production makes it (enqueued, claimed and completed in batches of 1,000), then",
    "vacuumed and analysed; the drain's new jobs land in the free space it leaves on its pages",
    "(about five to a page, against some fifty to a page in empty tables).",
]
TRACING_NOTES = [
    "The throughput drain in four modes, each run in a process of its own (bench/tracing_mode.py),",
    "the order rotating from run to run; every ratio is against the first:",
    "- **hooks removed**: OpenTelemetry absent and the worker's per-attempt hook taken out",
    "  (`run_attempt`, whose `tracer is None` check and coroutine frame are the hook, replaced by",
    "  a call that returns the attempt's own coroutine): the drain as if tracing had never been",
    '  written. The claim "no cost on the hot path without codity[otel]" is the next row\'s ratio;',
    "- **OpenTelemetry absent**: the hooks in place and off (as installed without the extra);",
    "- **installed, no tracer provider**: the worker makes no spans;",
    "- **on**: the SDK's provider, a span per attempt linked to the enqueuing span, spans dropped.",
    "",
    "A drain's run-to-run spread is larger than a hook can cost, so the last row measures the hooks",
    "directly, OpenTelemetry absent: the real `run_attempt(..., tracer=None)` against the",
    "hookless call on the same no-op job (alternating blocks, median), and",
    "`tracing.current_traceparent()`, the enqueue side's hook (once per enqueue call, not per",
    "job); the share is the attempt hook's time over one job's time at the absent drain's rate.",
]
EVENTS_NOTES = [
    "`codity bench events`: the drain above with a dashboard watching (the live-events triggers",
    "fire: migration 0024) and with nobody watching (they do not), alternating; then the API under",
    "uvicorn in the benchmark's",
    "process with N event streams open on one project while jobs change state R times a second",
    "(enqueue batches of 100): messages per stream per second, delivery delay, the largest mailbox,",
    "and the process's RSS sampled every second (flat = bounded memory).",
]
READS_COLUMNS = ["read", "p50", "p95", "<= 50 ms"]
READS_NOTES = [
    "`codity bench reads`: a scratch database with 1,000,000 jobs over 10 projects (3 queues each;",
    "98% completed, 1% dead-lettered with an error, 1% queued; created over 7 days), their",
    "executions, 10,000,000 log lines and the dead letters, after `VACUUM ANALYZE`; every dashboard",
    "read through the API's stores, on connections with the API's settings (statement_timeout,",
    "JIT off), 40 times each after one warm-up, for one project. Target: p95 <= 50 ms.",
]
RECOVERY_NOTES = [
    "Two `codity worker` processes and a `codity scheduler`; the worker running a long job is",
    "SIGKILLed, timed until the job is leased again by the other worker (floor: the lease plus up",
    "to one tick); then that worker gets SIGTERM, timed until it has exited (floor: the grace",
    "period). No peer column: pgqueuer has no leases to compare.",
]
XMIN_NOTES = [
    "Steady enqueue (batches every 10 ms) while 2 workers drain, then the drain of what is left;",
    "once with nothing else running and once with a REPEATABLE READ transaction (a snapshot) held",
    "open the whole time, which keeps every dead row of `jobs` from being vacuumed. Latency is",
    "enqueue → handler start over every job (database clock); throughput is jobs ÷ (first",
    "enqueue → last completion). Dead tuples: `pg_stat_user_tables.n_dead_tup` at the end.",
]
