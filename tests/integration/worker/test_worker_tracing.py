"""Tracing (codity[otel]), with OpenTelemetry's in-memory exporter: the enqueuing span's W3C
traceparent is stored on the job, each attempt is a CONSUMER span linked to it (an error status
when it fails), and the job's log lines carry the attempt's trace id. No global provider is
installed: the test's tracer is handed to the worker, so no other test is traced."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from tests.factories import make_queue
from tests.integration.worker.helpers import running_worker, wait_status

from codity import core, tracing
from codity.worker import HandlerRegistry, JobContext


@pytest.fixture
async def queue_id(db: asyncpg.Connection[Any]) -> uuid.UUID:
    return await make_queue(db)


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "worker_tracer", lambda: provider.get_tracer("codity.worker"))
    return provider.get_tracer("test.app"), exporter


async def test_attempt_spans_link_to_the_enqueuing_span(
    spans: tuple[Any, InMemorySpanExporter],
    database_url: str,
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
) -> None:
    tracer, exporter = spans
    registry = HandlerRegistry()

    @registry.handler("traced.ok")
    async def ok(ctx: JobContext) -> None:
        ctx.logger.info("working")

    @registry.handler("traced.fail")
    async def fail(ctx: JobContext) -> None:
        raise RuntimeError("nope")

    with tracer.start_as_current_span("checkout") as producer:
        traced = await core.enqueue(db, queue_id, core.NewJob("traced.ok"))
        failing = await core.enqueue(db, queue_id, core.NewJob("traced.fail", max_attempts=1))
    untraced = await core.enqueue(db, queue_id, core.NewJob("traced.ok"))

    made = producer.get_span_context()
    expected = f"00-{made.trace_id:032x}-{made.span_id:016x}-{int(made.trace_flags):02x}"
    stored = dict(await db.fetch("SELECT id, trace_parent FROM jobs"))
    assert stored == {traced.id: expected, failing.id: expected, untraced.id: None}

    async with running_worker(database_url, registry):
        await wait_status(db, traced.id, "completed")
        await wait_status(db, untraced.id, "completed")
        await wait_status(db, failing.id, "dead_letter")

    attempts = {
        s.attributes["codity.job.id"]: s
        for s in exporter.get_finished_spans()
        if s.name.startswith("codity.job ")
    }
    assert set(attempts) == {traced.id, failing.id, untraced.id}
    ok_span = attempts[traced.id]
    assert ok_span.kind is SpanKind.CONSUMER
    assert ok_span.attributes["codity.job.attempt"] == 1
    assert [link.context.span_id for link in ok_span.links] == [made.span_id]
    assert ok_span.status.status_code is not StatusCode.ERROR
    assert attempts[untraced.id].links == ()  # nothing to link to
    assert attempts[failing.id].status.status_code is StatusCode.ERROR
    assert "nope" in (attempts[failing.id].status.description or "")
    # The job's log lines carry the attempt's trace id.
    fields = await db.fetchval("SELECT fields FROM job_logs WHERE job_id = $1", traced.id)
    assert fields["trace_id"] == f"{ok_span.context.trace_id:032x}"


async def test_without_a_tracer_provider_there_are_no_spans_and_no_trace_ids(
    database_url: str, db: asyncpg.Connection[Any], queue_id: uuid.UUID
) -> None:
    assert tracing.worker_tracer() is None  # no provider configured in the suite
    registry = HandlerRegistry()

    @registry.handler("plain")
    async def plain(ctx: JobContext) -> None:
        ctx.logger.info("working")

    job = await core.enqueue(db, queue_id, core.NewJob("plain"))
    async with running_worker(database_url, registry):
        await wait_status(db, job.id, "completed")
    fields = await db.fetchval("SELECT fields FROM job_logs WHERE job_id = $1", job.id)
    assert "trace_id" not in fields


async def _inner_span_parents(
    spans: tuple[Any, InMemorySpanExporter],
    database_url: str,
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
    sync: bool,
) -> tuple[int | None, int]:
    """(the parent span id of a span the task makes, the attempt span's id)."""
    tracer, exporter = spans
    registry = HandlerRegistry()

    if sync:

        @registry.handler("traced.inner")
        def inner(ctx: JobContext) -> None:
            with tracer.start_as_current_span("task.work"):
                pass

    else:

        @registry.handler("traced.inner")
        async def inner_async(ctx: JobContext) -> None:
            with tracer.start_as_current_span("task.work"):
                pass

    job = await core.enqueue(db, queue_id, core.NewJob("traced.inner"))
    async with running_worker(database_url, registry):
        await wait_status(db, job.id, "completed")
    finished = {s.name: s for s in exporter.get_finished_spans()}
    work, attempt = finished["task.work"], finished["codity.job traced.inner"]
    return (work.parent.span_id if work.parent else None), attempt.context.span_id


async def test_spans_an_async_task_makes_are_children_of_its_attempt(
    spans: tuple[Any, InMemorySpanExporter],
    database_url: str,
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
) -> None:
    parent, attempt = await _inner_span_parents(spans, database_url, db, queue_id, sync=False)
    assert parent == attempt


async def test_spans_a_sync_task_makes_are_children_of_its_attempt(
    spans: tuple[Any, InMemorySpanExporter],
    database_url: str,
    db: asyncpg.Connection[Any],
    queue_id: uuid.UUID,
) -> None:
    parent, attempt = await _inner_span_parents(spans, database_url, db, queue_id, sync=True)
    assert parent == attempt
