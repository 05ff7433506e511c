"""A real worker, in the test's own process, that runs until no job is left to run."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from codity import VERSION
from codity.db.pool import connect
from codity.tasks import App
from codity.testing.database import TestDatabase
from codity.worker.config import WorkerConfig
from codity.worker.registry import HandlerRegistry, default_registry
from codity.worker.service import Worker

#: Jobs that a worker could still pick up, or is running: the queue is not empty yet.
_UNFINISHED = """
SELECT count(*) FROM jobs
WHERE status IN ('queued', 'claimed', 'running')
   OR (status IN ('scheduled', 'failed') AND run_at <= now())
"""


@dataclass(frozen=True)
class Drained:
    """What `run_until_empty` saw at the end: jobs by status."""

    counts: dict[str, int]

    def __getitem__(self, status: str) -> int:
        return self.counts.get(status, 0)


@dataclass
class TestWorker:
    """The `codity_worker` fixture."""

    __test__ = False

    database: TestDatabase
    capacity: int = 4

    async def run_until_empty(self, app: App | None = None, *, timeout_s: float = 30.0) -> Drained:
        """Run a worker with `app`'s tasks (or the `@handler` registry) until no job is queued,
        running, or due; then drain it. Jobs scheduled for later are left alone. Raises
        TimeoutError after `timeout_s` (a job that keeps failing and retrying, say)."""
        registry: HandlerRegistry = app.registry if app is not None else default_registry
        worker = Worker(self._config(), registry)
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        conn = await connect(self.database.url, application_name="codity-testing")
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if task.done():
                    task.result()  # the worker stopped by itself: show why
                unfinished = await conn.fetchval(_UNFINISHED)
                if unfinished == 0 and worker.ready.is_set():
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{unfinished} jobs still unfinished after {timeout_s} s")
                await asyncio.sleep(0.02)
            counts = await conn.fetch("SELECT status::text, count(*) FROM jobs GROUP BY 1")
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=30)
            await conn.close()
        return Drained({r["status"]: r["count"] for r in counts})

    def _config(self) -> Any:
        return WorkerConfig(
            database_url=self.database.url,
            capacity=self.capacity,
            queue_names=None,
            heartbeat_ms=1000,
            lease_ms=30_000,
            poll_interval_ms=50,
            shutdown_grace_ms=5000,
            version=VERSION,
        )
