"""`codity up`: the whole stack on one machine, in one terminal.

Database (embedded unless DATABASE_URL), migrations, a local SMTP sink (unless SMTP_URL), then
child processes: the API and the dashboard (when those commands exist), N workers and a
scheduler. Ctrl-C or SIGTERM: every child gets SIGTERM and drains (workers release unfinished
jobs without charging attempts), then the embedded database stops cleanly, exit 0. A child that
dies on its own is logged and left dead: the rest of the stack keeps running.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Annotated

import structlog
import typer

from codity.cli._common import console, database_url, friendly_errors, run, settings
from codity.cli._service import setup_logging
from codity.cli.smtp_sink import OUTBOX_DIR, smtp_sink
from codity.cli.web import DEFAULT_DIST, dashboard_built
from codity.db import migrate as migrations
from codity.db.dsn import redact
from codity.db.pool import connect

log = structlog.get_logger("codity.up")

DEMO_LOGIN = ("operator@codity.test", "correct-horse-battery-staple")
#: Beyond the workers' own grace period, how long children get to exit before SIGKILL.
EXTRA_STOP_S = 10.0


@dataclass
class Child:
    name: str
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    reported_exit: bool = False
    started_at: float = field(default_factory=time.monotonic)


class Supervisor:
    def __init__(self, children: list[Child], env: dict[str, str]) -> None:
        self.children = children
        self.env = env

    def start(self) -> None:
        for child in self.children:
            # A session of its own: Ctrl-C in the terminal reaches `up` only, and `up` decides
            # the order of shutdown instead of every process racing on its own.
            child.process = subprocess.Popen(
                [sys.executable, "-m", "codity.cli", *child.args],
                env=self.env,
                start_new_session=True,
            )
            log.info("started", child=child.name, pid=child.process.pid)

    def check(self) -> None:
        """Log children that exited on their own; the others keep running."""
        for child in self.children:
            if child.process is None or child.reported_exit:
                continue
            code = child.process.poll()
            if code is not None:
                child.reported_exit = True
                log.error(
                    "child exited unexpectedly",
                    child=child.name,
                    pid=child.process.pid,
                    exit_code=code,
                )

    def stop(self, timeout_s: float) -> None:
        alive = [c for c in self.children if c.process and c.process.poll() is None]
        for child in alive:
            assert child.process is not None
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for child in alive:
            assert child.process is not None
            try:
                code = child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                log.info("stopped", child=child.name, exit_code=code)
            except subprocess.TimeoutExpired:
                log.error("did not stop in time; killing", child=child.name)
                child.process.kill()
                child.process.wait()


def has_command(module: str) -> bool:
    return importlib.util.find_spec(f"codity.cli.{module}") is not None


async def _check_reachable(url: str) -> None:
    conn = await connect(url, application_name="codity-up")
    await conn.close()


def _banner(api: bool, web: bool, api_port: int, web_port: int, workers: int) -> None:
    lines = []
    if web:
        lines.append(f"  dashboard  http://localhost:{web_port}")
    if api:
        lines.append(f"  API        http://localhost:{api_port}")
        lines.append(f"  Swagger    http://localhost:{api_port}/api/v1/docs")
    lines.append(f"  workers    {workers}, scheduler 1")
    lines.append(f"  demo login {DEMO_LOGIN[0]} / {DEMO_LOGIN[1]}")
    lines.append("  Ctrl-C drains everything and exits.")
    console.print("[bold green]codity is up[/]\n" + "\n".join(lines), highlight=False)


@friendly_errors
def up_command(
    workers: Annotated[int, typer.Option("--workers", "-w", min=1, help="Worker processes.")] = 1,
    api: Annotated[bool, typer.Option("--api/--no-api", help="Start the API if available.")] = True,
    web: Annotated[
        bool, typer.Option("--web/--no-web", help="Start the dashboard if available.")
    ] = True,
) -> None:
    """Start the whole stack: database, migrations, API, workers, scheduler, dashboard, SMTP sink."""
    cfg = settings()
    setup_logging(cfg, "up")
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("stop requested", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with database_url() as url, contextlib.ExitStack() as stack:
        run(_check_reachable(url))
        migrations.upgrade(url)
        log.info("database ready", url=redact(url), revision=migrations.head_revision())
        smtp_url = cfg.smtp_url
        if not smtp_url:
            smtp_url = stack.enter_context(smtp_sink(OUTBOX_DIR.resolve()))
            log.info(
                "SMTP_URL not set: local SMTP sink writes each message to .codity/outbox/",
                smtp_url=smtp_url,
                outbox=str(OUTBOX_DIR.resolve()),
            )
        env = {**os.environ, "DATABASE_URL": url, "SMTP_URL": smtp_url}
        start_api, start_web = api and has_command("api"), web and dashboard_built()
        if web and not start_web:
            log.warning(
                "dashboard not started: it is not built (run `make web` in a checkout)",
                dist=str(DEFAULT_DIST),
            )
        children = (
            ([Child("api", ["api"])] if start_api else [])
            + [Child(f"worker-{i + 1}", ["worker"]) for i in range(workers)]
            + [Child("scheduler", ["scheduler"])]
            + ([Child("web", ["web"])] if start_web else [])
        )
        supervisor = Supervisor(children, env)
        supervisor.start()
        _banner(start_api, start_web, cfg.api_port, cfg.web_port, workers)
        try:
            while not stop.wait(0.5):
                supervisor.check()
        finally:
            supervisor.stop(cfg.shutdown_grace_ms / 1000 + EXTRA_STOP_S)
    log.info("codity is down")
