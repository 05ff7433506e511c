"""The real stack for the browser tests: its own database, the demo data, real processes.

`codity up` starts everything when it exists; otherwise the services are started one by one
(`codity api`, two `codity worker`, `codity scheduler`, `codity web`). Every process gets its
own session so teardown can signal the whole group: SIGTERM first, SIGKILL after a grace.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path

import httpx

from codity.cli.smtp_sink import smtp_sink

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CODITY = [sys.executable, "-m", "codity.cli"]
#: Fast intervals so a killed worker is declared dead in seconds, not a minute.
FAST_INTERVALS = {
    "WORKER_HEARTBEAT_MS": "500",
    "WORKER_LEASE_MS": "3000",
    "WORKER_POLL_INTERVAL_MS": "200",
    "SCHEDULER_TICK_MS": "500",
    "DEAD_WORKER_AFTER_MS": "3000",
    "SHUTDOWN_GRACE_MS": "3000",
    # Streams end (and the dashboard reconnects) every few seconds, so the suite exercises the
    # reconnection path and can cut a stream by refusing the next connection.
    "EVENTS_STREAM_MAX_S": "8",
    # Bulk actions in small, spaced chunks: the browser test sees one in progress (and stops
    # or watches it) before it completes.
    "BULK_ACTION_CHUNK": "100",
    "BULK_ACTION_PAUSE_MS": "600",
}
READY_TIMEOUT_S = 90.0
DEMO_EMAIL = "operator@codity.test"
DEMO_PASSWORD = "correct-horse-battery-staple"
STOP_GRACE_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def has_command(name: str) -> bool:
    """Whether `codity <name>` exists (engineers add commands as they land)."""
    result = subprocess.run(
        [*CODITY, name, "--help"], capture_output=True, cwd=REPO, timeout=60, check=False
    )
    return result.returncode == 0


@dataclass
class Stack:
    web_url: str
    api_url: str
    env: dict[str, str]
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    #: Where the stack's mail lands (a local SMTP sink the suite runs): `.eml` files.
    outbox: Path | None = None

    def mails_to(self, address: str) -> list[EmailMessage]:
        assert self.outbox is not None, "this stack has no outbox (CODITY_E2E_URL)"
        found = []
        for path in sorted(self.outbox.glob("*.eml")):
            message = BytesParser(policy=policy.default).parsebytes(path.read_bytes())
            if isinstance(message, EmailMessage) and address in str(message["To"]):
                found.append(message)
        return found

    def link_to(self, address: str, path: str, timeout_s: float = 15.0) -> str:
        """The `path?token=...` link of the newest mail to `address` (waiting for it)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for message in reversed(self.mails_to(address)):
                body = message.get_body(("plain",))
                text = body.get_content() if body is not None else ""
                match = re.search(rf"https?://[^\s]*{re.escape(path)}\?token=[^\s]+", text)
                if match:
                    return match.group(0)
            time.sleep(0.2)
        raise AssertionError(f"no mail to {address} with a {path} link in {self.outbox}")

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("ab") as log:  # the child keeps its own copy
            proc = subprocess.Popen(
                [*CODITY, *args],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(proc)
        return proc

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        last = "no answer"
        while time.monotonic() < deadline:
            for proc in self.processes:
                if proc.poll() is not None and proc.returncode not in (0, None):
                    raise RuntimeError(
                        f"{proc.args} exited with {proc.returncode}; see {self.logs}"
                    )
            try:
                ready = httpx.get(f"{self.web_url}/readyz", timeout=2)
                if ready.status_code == 200:
                    return
                last = f"{ready.status_code} {ready.text[:200]}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.3)
        raise RuntimeError(
            f"the stack was not ready after {READY_TIMEOUT_S}s ({last}); see {self.logs}"
        )

    def check_demo_login(self) -> None:
        """Fail every test at once, with the API's answer, when the demo login is refused
        (otherwise each test would wait out its own timeout on the login form)."""
        answer = httpx.post(
            f"{self.web_url}/api/v1/auth/login",
            json={"email": DEMO_EMAIL, "password": DEMO_PASSWORD},
            timeout=30,
        )
        if answer.status_code != 200:
            raise RuntimeError(
                f"the API refuses the demo login {DEMO_EMAIL}: {answer.status_code} {answer.text[:500]}"
            )

    def stop(self) -> None:
        for proc in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.processes:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


def run_codity(env: dict[str, str], *args: str, logs: Path) -> None:
    result = subprocess.run(
        [*CODITY, *args], cwd=REPO, env=env, capture_output=True, timeout=120, check=False
    )
    (logs / f"{'-'.join(args)}.log").write_bytes(result.stdout + result.stderr)
    if result.returncode != 0:
        raise RuntimeError(f"codity {' '.join(args)} failed: {result.stderr.decode()[-2000:]}")


@contextlib.contextmanager
def running_stack(database_url: str) -> Iterator[Stack]:
    api_port, web_port = free_port(), free_port()
    logs = ARTIFACTS / "e2e-logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        **FAST_INTERVALS,
        "DATABASE_URL": database_url,
        "CODITY_ENV": "development",
        "API_HOST": "127.0.0.1",
        "API_PORT": str(api_port),
        "WEB_PORT": str(web_port),
        "JWT_SECRET": secrets.token_urlsafe(32),
        "JWT_REFRESH_SECRET": secrets.token_urlsafe(32),
        "LOG_FORMAT": "json",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("TEST_DATABASE_URL", None)
    run_codity(env, "db", "demo", logs=logs)
    outbox = logs / f"outbox-{secrets.token_hex(4)}"
    mail = contextlib.ExitStack()
    # The stack's mail goes to the suite's own sink; links in it point at this stack.
    env["SMTP_URL"] = mail.enter_context(smtp_sink(outbox))
    env["PUBLIC_URL"] = f"http://127.0.0.1:{web_port}"
    stack = Stack(
        web_url=f"http://127.0.0.1:{web_port}",
        api_url=f"http://127.0.0.1:{api_port}",
        env=env,
        logs=logs,
        outbox=outbox,
    )
    try:
        if has_command("up"):
            stack.start("up", "up", "--workers", "2")
        else:
            stack.start("api", "api", "--port", str(api_port))
            stack.start("worker-1", "worker")
            stack.start("worker-2", "worker")
            stack.start("scheduler", "scheduler")
            stack.start("web", "web", "--port", str(web_port), "--api-url", stack.api_url)
        stack.wait_ready()
        stack.check_demo_login()
        yield stack
    finally:
        stack.stop()
        mail.close()
