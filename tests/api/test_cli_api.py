"""`codity api` serves the app from a real process: ready against a migrated database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_codity_api_serves_and_stops_on_sigterm(database_url: str) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CODITY_ENV": "test",
        "JWT_SECRET": "cli-test-secret-" + "z" * 32,
        "JWT_REFRESH_SECRET": "cli-test-refresh-" + "z" * 32,
        "LOG_FORMAT": "json",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "codity", "api", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        ready = None
        while time.monotonic() < deadline:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert ready is not None, "the API did not start listening"
        assert ready.status_code == 200, ready.text
        docs = httpx.get(f"http://127.0.0.1:{port}/api/v1/docs", timeout=5)
        assert docs.status_code == 200
        assert "server" not in docs.headers
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=20)[0].decode()
    assert proc.returncode == 0, output
    assert '"event": "request"' in output  # the structured access log
