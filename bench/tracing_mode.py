"""One throughput run in a process of its own, with tracing absent, installed-but-idle, or on.

`codity bench tracing` runs this script once per mode and run, alternating, so the three
differ only in what OpenTelemetry can do (a script, not a module of codity: "absent" must block
the import before anything of codity is imported):

- absent: `opentelemetry` cannot be imported (as without `codity[otel]`): the hooks are off;
- idle: OpenTelemetry importable, no tracer provider configured: the worker makes no spans;
- on: the SDK's provider with a batch processor and an exporter that drops the spans: a span
  per attempt, linked to the enqueuing span.

Usage: python bench/tracing_mode.py MODE SERVER_URL JOBS WORKERS CAPACITY
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

MODES = ("absent", "idle", "on")


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


def main(argv: list[str]) -> None:
    mode, server, jobs, workers, capacity = argv[0], argv[1], *map(int, argv[2:5])
    if mode == "absent":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # ImportError from now on
        assert not any(name.startswith("codity") for name in sys.modules)
    elif mode == "on":
        _trace_everything()
    from codity import tracing
    from codity.cli import benchmarks
    from codity.logs import configure_logging

    configure_logging("WARNING", "console")
    if (mode != "absent") != tracing.AVAILABLE:
        raise SystemExit(f"tracing.AVAILABLE is {tracing.AVAILABLE} in mode {mode}")
    result: Any = asyncio.run(benchmarks.throughput(server, jobs, workers, capacity))
    print(json.dumps({"mode": mode, "jobs_per_s": result.jobs_per_s}))


if __name__ == "__main__":
    main(sys.argv[1:])
