"""LISTEN on `codity_jobs` over a dedicated connection and wake the producer on each NOTIFY.

Enqueue sends the queue id as the payload, so a worker wakes only for queues it serves. Polling
remains as a fallback (a lost notification, a missed one while reconnecting); after every
(re)connection the producer is woken once, because notifications sent while we were away are
gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from codity import core
from codity.db.pool import connect
from codity.db.reconnect import Backoff, is_transient, sleep_or_stop, wait_any

log = structlog.get_logger("codity.worker.notifier")

#: How often a quiet listening connection is checked for being closed underneath us.
LIVENESS_CHECK_S = 2.0


class Notifier:
    def __init__(
        self,
        database_url: str,
        *,
        queue_ids: Callable[[], frozenset[str]],
        wake: Callable[[], None],
    ) -> None:
        self._url = database_url
        self._queue_ids = queue_ids
        self._wake = wake
        self.connected = asyncio.Event()

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if not payload or payload in self._queue_ids():
            self._wake()

    async def run(self, stop: asyncio.Event) -> None:
        backoff = Backoff()
        while not stop.is_set():
            try:
                conn = await connect(self._url, application_name="codity-worker-listen")
                await conn.add_listener(core.NOTIFY_CHANNEL, self._on_notify)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                delay = backoff.next_delay()
                log.warning("cannot LISTEN; retrying", retry_in_s=round(delay, 2), error=str(exc))
                await sleep_or_stop(delay, stop)
                continue
            if backoff.failures:
                log.info("listening again", channel=core.NOTIFY_CHANNEL)
            backoff.reset()
            lost = asyncio.Event()
            conn.add_termination_listener(lambda _c, event=lost: event.set())
            self.connected.set()
            self._wake()
            try:
                while not stop.is_set() and not lost.is_set() and not conn.is_closed():
                    await wait_any(stop, lost, timeout_s=LIVENESS_CHECK_S)
            finally:
                self.connected.clear()
                if not conn.is_closed():
                    try:
                        await asyncio.wait_for(conn.close(), timeout=2)
                    except Exception:
                        conn.terminate()
            if not stop.is_set():
                log.warning("listening connection lost; reconnecting")
