"""LISTEN on `codity_jobs` over a dedicated connection and wake the producer on each NOTIFY.

Enqueue sends the queue id as the payload, so a worker wakes only for queues it serves; the
producer then claims at once. A payload naming a queue the worker does not know goes to
`on_unknown` (a worker serving every queue looks for new queues then). Polling remains as a fallback (a lost notification, a missed one
while reconnecting); after every (re)connection the producer is woken once, because
notifications sent while we were away are gone. Each iteration of this loop is one connection's
life: connect, LISTEN, wait until it is lost (or the worker stops); the loop service reconnects
with backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from codity import core
from codity.core.loop_service import LoopService
from codity.db.pool import connect
from codity.db.reconnect import wait_any

log = structlog.get_logger("codity.worker.notifier")

#: How often a quiet listening connection is checked for being closed underneath us.
LIVENESS_CHECK_S = 2.0
#: Pause before reconnecting after a connection was lost.
RECONNECT_MS = 100


class Notifier(LoopService):
    name = "notifier"

    def __init__(
        self,
        database_url: str,
        *,
        queue_ids: Callable[[], frozenset[str]],
        wake: Callable[[], None],
        on_unknown: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(None, interval_ms=RECONNECT_MS)
        self._url = database_url
        self._queue_ids = queue_ids
        self._wake = wake
        self._on_unknown = on_unknown
        self.connected = asyncio.Event()
        self._lost_before = False

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if not payload or payload in self._queue_ids():
            self._wake()
        elif self._on_unknown is not None:
            self._on_unknown()

    async def run_once(self) -> bool:
        conn = await connect(self._url, application_name="codity-worker-listen")
        try:
            await conn.add_listener(core.NOTIFY_CHANNEL, self._on_notify)
            if self._lost_before:
                log.info("listening again", channel=core.NOTIFY_CHANNEL)
            lost = asyncio.Event()
            conn.add_termination_listener(lambda _c: lost.set())
            self.connected.set()
            self._wake()
            while not self.stopping.is_set() and not lost.is_set() and not conn.is_closed():
                await wait_any(self.stopping, lost, timeout_s=LIVENESS_CHECK_S)
        finally:
            self.connected.clear()
            if not conn.is_closed():
                try:
                    await asyncio.wait_for(conn.close(), timeout=2)
                except Exception:
                    conn.terminate()
        if not self.stopping.is_set():
            self._lost_before = True
            log.warning("listening connection lost; reconnecting")
        return False
