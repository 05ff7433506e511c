"""`codity worker`: one worker process."""

from __future__ import annotations

import os
import sys
import threading
from typing import Annotated

import typer

from codity import VERSION
from codity.cli._common import database_url, friendly_errors, settings
from codity.cli._service import run_until_signalled, setup_logging
from codity.tasks import load_app
from codity.worker import default_registry
from codity.worker.config import WorkerConfig
from codity.worker.gc_tuning import tune_for_worker
from codity.worker.service import Worker


@friendly_errors
def worker_command(
    queues: Annotated[
        list[str] | None,
        typer.Option(
            "--queues",
            "-q",
            help="Queue names to serve (repeat or comma-separate); default every queue.",
        ),
    ] = None,
    capacity: Annotated[
        int | None,
        typer.Option("--capacity", "-c", min=1, help="Jobs run at once (WORKER_CAPACITY)."),
    ] = None,
    app_modules: Annotated[
        list[str] | None,
        typer.Option(
            "--app",
            "-a",
            help="mymodule:app runs that codity.App's tasks; a bare module (mypkg.jobs) "
            "registers its @handler functions. Repeatable.",
        ),
    ] = None,
) -> None:
    """Run a worker: claim jobs, run their handlers, record the outcomes. SIGTERM drains."""
    cfg = settings()
    setup_logging(cfg, "worker")
    import codity.worker.handlers  # noqa: F401  (registers the built-in handlers)

    for target in app_modules or []:
        app = load_app(target)
        if app is not None:
            default_registry.include(app.registry)
    names = tuple(n.strip() for q in queues or [] for n in q.split(",") if n.strip())
    with database_url() as url:
        config = WorkerConfig.from_settings(
            cfg, database_url=url, version=VERSION, capacity=capacity, queue_names=names or None
        )
        worker = Worker(config, default_registry)
        tune_for_worker()  # everything the process runs is loaded now
        run_until_signalled(worker.run)
    if any(
        t.is_alive() and not t.daemon
        for t in threading.enumerate()
        if t is not threading.main_thread()
    ):
        # A sync handler still running in its thread cannot be interrupted; its job has been
        # released already, so it must not hold the process open past the drain.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
