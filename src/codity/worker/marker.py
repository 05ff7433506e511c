"""The marker: a job is marked `running` in the database once its handler has run a moment.

Most jobs of a busy queue finish within MARK_RUNNING_AFTER_S and go straight from `claimed` to
`completed` (an allowed edge), their handler's start time carried by the completion: one UPDATE
per job saved on the hot path, while anything an operator could watch running still shows as
running within 0.1 s. Many jobs per statement; a lost lease found here stops the handler.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from codity import core
from codity.core.loop_service import LoopService
from codity.worker.connection import HeldConnection
from codity.worker.executor import Executor
from codity.worker.running import Running

log = structlog.get_logger("codity.worker")

#: A job is marked `running` once its handler has run this long.
MARK_RUNNING_AFTER_S = 0.1


class Marker(LoopService):
    name = "marker"

    def __init__(
        self,
        conn: HeldConnection,
        *,
        running: Running,
        executor: Executor,
        write_lock: asyncio.Lock,
    ) -> None:
        super().__init__(conn, interval_ms=int(MARK_RUNNING_AFTER_S * 1000))
        self.held_conn = conn
        self._running = running
        self._executor = executor
        self._write_lock = write_lock

    def on_error(self, exc: Exception) -> None:
        self.held_conn.discard()  # it may be broken mid-operation: the next round reconnects

    async def run_once(self) -> bool:
        due_before = time.monotonic() - MARK_RUNNING_AFTER_S
        due = [
            rj
            for rj in self._running.jobs.values()
            if not rj.marked_running and rj.started_monotonic <= due_before
        ]
        if not due:
            return False
        conn = await self.held_conn.get()
        async with self._write_lock:
            result = await core.mark_running(
                conn, [rj.job.fence for rj in due], [rj.started_at for rj in due]
            )
        for rj in due:
            rj.marked_running = True
        lost = set(result.lease_lost)
        for rj in due:
            if rj.job.id in lost:
                self._executor.lose(rj.job.fence)  # someone else holds the job now
        return False
