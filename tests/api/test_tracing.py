"""API requests are spans (codity[otel], OpenTelemetry's ASGI middleware), and a job enqueued
by a request stores that request's trace context, so the worker's span links back to it."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from tests.api.conftest import API, app_client, make_settings, register_and_login

from codity import tracing
from codity.api.app import create_app


async def test_a_request_is_a_span_and_its_enqueue_carries_its_trace(
    monkeypatch: pytest.MonkeyPatch, database_url: str, api_db: asyncpg.Connection[Any]
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    class TestMiddleware(OpenTelemetryMiddleware):
        def __init__(self, app: Any, **kwargs: Any) -> None:
            super().__init__(app, tracer_provider=provider, **kwargs)

    monkeypatch.setattr(tracing, "asgi_middleware", lambda: TestMiddleware)
    app = create_app(make_settings(database_url))
    async with app_client(app) as client:
        owner = await register_and_login(client, api_db)
        headers = {"Authorization": f"Bearer {owner.access_token}"}
        base = f"{API}/projects/{owner.project_id}"
        made = await client.post(f"{base}/queues", json={"name": "traced"}, headers=headers)
        assert made.status_code == 201, made.text
        job = await client.post(f"{base}/jobs", json={"queue": "traced", "handler": "h"},
                                headers=headers)  # fmt: skip
        assert job.status_code == 201, job.text
        assert (await client.get("/healthz")).status_code == 200

    servers = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.SERVER]
    enqueue = [s for s in servers if s.attributes.get("http.method") == "POST"
               and str(s.attributes.get("http.target", s.attributes.get("url.path", ""))).endswith("/jobs")]  # fmt: skip
    assert len(enqueue) == 1, [s.name for s in servers]
    assert not any("healthz" in s.name for s in servers)  # probes are not traced
    stored = await api_db.fetchval("SELECT trace_parent FROM jobs WHERE id = $1", job.json()["id"])
    assert stored is not None
    assert stored.split("-")[1] == f"{enqueue[0].context.trace_id:032x}"
