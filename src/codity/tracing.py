"""Tracing with OpenTelemetry, when the optional extra is installed (`pip install codity[otel]`).

- Enqueue stores the W3C `traceparent` of the caller's current span on each job
  (`jobs.trace_parent`), when there is one.
- The worker makes one CONSUMER span per attempt, *linked* to that producer span (an attempt
  may run long after, and several times: a link, not a parent), with the job's id, attempt and
  queue as attributes and an error status when the attempt fails; the job's log lines carry its
  trace id.
- The API (`codity.api.app`) wraps every request in a span (opentelemetry-instrumentation-asgi).

Without the extra nothing here imports OpenTelemetry and every hook is one `is None` check;
with it but no tracer provider configured by the application, the worker makes no spans.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

try:
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the extra is not installed: tracing is off, at no cost
    otel_trace = None  # type: ignore[assignment]
    TraceContextTextMapPropagator = None  # type: ignore[assignment,misc]

#: Whether OpenTelemetry is importable at all.
AVAILABLE = otel_trace is not None
_PROPAGATOR: Any = TraceContextTextMapPropagator() if AVAILABLE else None


def current_traceparent() -> str | None:
    """The W3C traceparent of the caller's active span, or None (no extra, no span)."""
    if otel_trace is None:
        return None
    if not otel_trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


def worker_tracer() -> Any | None:
    """The tracer a worker uses, or None when no tracer provider is configured (then the
    worker makes no spans at all)."""
    if otel_trace is None:
        return None
    provider = otel_trace.get_tracer_provider()
    if isinstance(provider, otel_trace.ProxyTracerProvider | otel_trace.NoOpTracerProvider):
        return None
    return provider.get_tracer("codity.worker")


@contextlib.contextmanager
def attempt_span(
    tracer: Any,
    *,
    handler: str,
    job_id: int,
    attempt: int,
    queue_id: object,
    trace_parent: str | None,
) -> Iterator[Any]:
    """A CONSUMER span around one attempt, linked to the enqueuing span when there was one."""
    links = []
    if trace_parent:
        producer = otel_trace.get_current_span(
            _PROPAGATOR.extract({"traceparent": trace_parent})
        ).get_span_context()
        if producer.is_valid:
            links.append(otel_trace.Link(producer))
    with tracer.start_as_current_span(
        f"codity.job {handler}",
        kind=otel_trace.SpanKind.CONSUMER,
        links=links,
        attributes={
            "codity.job.id": job_id,
            "codity.job.attempt": attempt,
            "codity.job.handler": handler,
            "codity.queue.id": str(queue_id),
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


def trace_id_of(span: Any) -> str:
    return format(span.get_span_context().trace_id, "032x")


def mark_failed(span: Any, description: str) -> None:
    span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, description))


def asgi_middleware() -> Any | None:
    """OpenTelemetry's ASGI middleware class, when the extra is installed."""
    if not AVAILABLE:
        return None
    try:
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
    except ImportError:
        return None
    return OpenTelemetryMiddleware
