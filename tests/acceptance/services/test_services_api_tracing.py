"""The recipe docs/PYTHON_API.md ("Tracing") gives for tracing the `codity api` process, run
for real: a launcher that configures a tracer provider and then runs codity's own CLI
(`python run_api.py api ...`). Every request becomes a SERVER span exported by the provider
(health probes excepted), and a job enqueued by a request stores that request's trace id."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from tests.accounts import sign_up
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

LAUNCHER = '''
import json
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class ToFile(SpanExporter):
    """Stands in for an OTLP exporter: one JSON line per finished span."""

    def __init__(self, path):
        self.path = path

    def export(self, spans):
        with open(self.path, "a") as out:
            for s in spans:
                out.write(json.dumps({"name": s.name, "kind": s.kind.name,
                                      "method": s.attributes.get("http.method"),
                                      "trace_id": format(s.context.trace_id, "032x")}) + "\\n")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ToFile(sys.argv.pop(1))))
trace.set_tracer_provider(provider)

from codity.cli import main

main()
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_api_process_traces_requests_with_a_provider_set_up_before_the_cli(
    tmp_path: Path, database_url: str, db: asyncpg.Connection[Any]
) -> None:
    launcher, spans, log = tmp_path / "run_api.py", tmp_path / "spans.jsonl", tmp_path / "api.log"
    launcher.write_text(LAUNCHER)
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "CODITY_ENV": "test", "LOG_FORMAT": "json"}
    env.pop("TEST_DATABASE_URL", None)
    with log.open("wb") as out:
        api = subprocess.Popen(
            [sys.executable, str(launcher), str(spans), "api", "--port", str(port)],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:

        async def ready() -> bool:
            try:
                async with httpx.AsyncClient() as http:
                    return (await http.get(f"{base}/readyz", timeout=1)).status_code == 200
            except httpx.TransportError:
                return False

        await wait_for(ready, timeout_s=30, what="codity api to be ready")
        async with httpx.AsyncClient(base_url=base + "/api/v1", timeout=10) as http:
            assert (await http.get(f"{base}/healthz")).status_code == 200
            token, project = await sign_up(
                http, db, email=f"traced-{uuid.uuid4().hex[:8]}@codity.test",
                password="correct-horse-battery-staple", prefix="",
            )  # fmt: skip
            headers = {"Authorization": f"Bearer {token}"}
            made = await http.post(f"/projects/{project}/queues", json={"name": "traced"},
                                   headers=headers)  # fmt: skip
            assert made.status_code == 201, made.text
            job = await http.post(f"/projects/{project}/jobs", headers=headers,
                                  json={"queue": "traced", "handler": "h"})  # fmt: skip
            assert job.status_code == 201, job.text
    finally:
        api.send_signal(signal.SIGTERM)
        try:
            api.wait(timeout=15)
        except subprocess.TimeoutExpired:
            api.kill()
            api.wait()
    assert "Traceback" not in log.read_text(), log.read_text()
    finished = [json.loads(line) for line in spans.read_text().splitlines()]
    servers = [s for s in finished if s["kind"] == "SERVER"]
    enqueues = [s for s in servers if s["method"] == "POST" and s["name"].endswith("/jobs")]
    assert len(enqueues) == 1, [s["name"] for s in servers]
    assert not any("healthz" in s["name"] or "readyz" in s["name"] for s in servers)
    stored = await db.fetchval("SELECT trace_parent FROM jobs WHERE id = $1", job.json()["id"])
    assert stored.split("-")[1] == enqueues[0]["trace_id"]
