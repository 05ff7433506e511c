"""One tracing benchmark run in a process of its own: a throughput drain in one of four modes,
or a micro-benchmark of the hooks themselves.

`codity bench tracing` runs this script once per mode and run, rotating which mode goes first,
so the modes differ only in what tracing can do (a script, not a module of codity: "absent"
must block the import before anything of codity is imported):

- hookless: as absent, and the worker's per-attempt tracing hook removed: `run_attempt` (whose
  `tracer is None` check and coroutine frame are the hook) is replaced by a plain function that
  returns `_run_attempt(...)` itself, so the drain runs the attempt exactly as if the tracing
  code had never been written. The baseline the claim "no cost without the extra" needs;
- absent: `opentelemetry` cannot be imported (as without `codity[otel]`): the hooks are there,
  and off;
- idle: OpenTelemetry importable, no tracer provider configured: the worker makes no spans;
- on: the SDK's provider with a batch processor and an exporter that drops the spans: a span
  per attempt, linked to the enqueuing span;
- micro: OpenTelemetry absent; the real `run_attempt(..., tracer=None)` against the hookless
  call on the same no-op job, N attempts each in alternating blocks, and
  `tracing.current_traceparent()` (the enqueue side's hook, once per enqueue call): nanoseconds
  per call, a figure the drains' run-to-run noise cannot hide.

Usage: python bench/tracing_mode.py MODE SERVER_URL JOBS WORKERS CAPACITY
       python bench/tracing_mode.py micro CALLS
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

MODES = ("hookless", "absent", "idle", "on")
#: The micro-benchmark's calls are timed in this many alternating blocks per variant.
BLOCKS = 20


def _trace_everything() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Drop(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)


def _block_opentelemetry() -> None:
    sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # ImportError from now on
    assert not any(name.startswith("codity") for name in sys.modules)


def hookless_run_attempt() -> Any:
    """`run_attempt` without its tracing hook: the attempt's own coroutine, returned as is."""
    from codity.worker import executor

    def run_attempt(
        ctx: Any,
        *,
        timeout_ms: int | None,
        registry: Any,
        threads: Any,
        cancel_requested: Any,
        started_at: Any = None,
        tracer: Any = None,
        on_thread: Any = None,
    ) -> Any:
        return executor._run_attempt(
            ctx, timeout_ms, registry, threads, cancel_requested, started_at, on_thread
        )

    return run_attempt


def remove_the_hooks() -> None:
    """The executor calls `run_attempt` through its module: replace it there."""
    from codity.worker import executor

    executor.run_attempt = hookless_run_attempt()  # type: ignore[assignment]


async def micro(calls: int) -> dict[str, float]:
    """ns per call: the real run_attempt (tracer=None), the hookless call, current_traceparent."""
    import threading
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    from codity import core, tracing
    from codity.worker import executor
    from codity.worker.context import JobContext
    from codity.worker.job_logger import JobLogger
    from codity.worker.registry import HandlerRegistry

    registry = HandlerRegistry()

    @registry.handler("noop")
    async def noop(ctx: JobContext) -> None:
        return None

    fence = core.Fence(job_id=1, worker_id=uuid.UUID(int=0), execution_seq=1)
    ctx = JobContext(
        job_id=1, queue_id=uuid.UUID(int=0), handler="noop", payload={}, attempt=1,
        max_attempts=1, execution_seq=1, deadline=None, logger=JobLogger(fence),
        cancelled=threading.Event(), db=None, _fence=fence,
    )  # fmt: skip
    direct = hookless_run_attempt()
    variants = {"with_hook": executor.run_attempt, "hookless": direct}
    per_block = max(1, calls // BLOCKS)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    with ThreadPoolExecutor(1) as threads:
        for block in range(BLOCKS):
            order = list(variants) if block % 2 == 0 else list(reversed(variants))
            for name in order:
                fn = variants[name]
                started = time.perf_counter_ns()
                for _ in range(per_block):
                    outcome = await fn(
                        ctx, timeout_ms=None, registry=registry, threads=threads,
                        cancel_requested=bool, started_at=None, tracer=None, on_thread=None,
                    )  # fmt: skip
                samples[name].append((time.perf_counter_ns() - started) / per_block)
                assert isinstance(outcome, core.Completion), outcome
    started = time.perf_counter_ns()
    for _ in range(calls):
        tracing.current_traceparent()
    traceparent_ns = (time.perf_counter_ns() - started) / calls
    with_hook = statistics.median(samples["with_hook"])
    hookless = statistics.median(samples["hookless"])
    return {
        "with_hook_ns": with_hook,
        "hookless_ns": hookless,
        "hook_ns": with_hook - hookless,
        "traceparent_ns": traceparent_ns,
    }


def main(argv: list[str]) -> None:
    mode = argv[0]
    if mode == "micro":
        _block_opentelemetry()
        figures = asyncio.run(micro(int(argv[1])))
        print(json.dumps({"mode": mode, **figures}))
        return
    server, jobs, workers, capacity = argv[1], *map(int, argv[2:5])
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode!r} (one of {', '.join(MODES)}, micro)")
    if mode in ("absent", "hookless"):
        _block_opentelemetry()
    elif mode == "on":
        _trace_everything()
    from codity import tracing
    from codity.cli import benchmarks
    from codity.logs import configure_logging

    configure_logging("WARNING", "console")
    if (mode in ("idle", "on")) != tracing.AVAILABLE:
        raise SystemExit(f"tracing.AVAILABLE is {tracing.AVAILABLE} in mode {mode}")
    if mode == "hookless":
        remove_the_hooks()
    result: Any = asyncio.run(benchmarks.throughput(server, jobs, workers, capacity))
    print(json.dumps({"mode": mode, "jobs_per_s": result.jobs_per_s}))


if __name__ == "__main__":
    main(sys.argv[1:])
