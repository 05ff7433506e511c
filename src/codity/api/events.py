"""Live events for the dashboard: ONE LISTEN connection per API process, fanned out in memory.

The database announces changes on the `codity_events` channel (statement-level triggers,
migration 0005: one notification per statement, summarising the jobs it moved per queue and
new status; worker up/down; queue paused/resumed). The hub:

1. listens on its own connection (never one per browser) and appends each payload to a
   bounded inbox (the notification callback does nothing else);
2. every `flush_s` (0.25 s) drains the inbox, maps queues and workers to their projects (a
   small cache, refreshed from the database on a miss), and merges everything that happened to
   a project into one summary: jobs per queue and status, up to `MAX_JOB_IDS` job ids,
   workers and queues that changed; at most 1/flush_s messages per project, whatever the load;
3. puts each project's summary into the mailbox of every subscriber of THAT project only.

The jobs triggers fire only while some hub has subscribers (migration 0024): a hub sets the
database's flag (`codity_events_watched_until`, a Unix time WATCH_S ahead) before it answers a
new subscriber's stream, and again every WATCH_REFRESH_S while it has any. With no dashboard
open anywhere no job statement pays for a summary nobody reads, and no NOTIFY wakes the
workers' listening connections; the flag lapses WATCH_S after the last subscriber left.

Memory is bounded everywhere: the inbox holds at most `INBOX_LIMIT` payloads, a summary at most
`MAX_JOB_IDS` ids, and a mailbox `MAILBOX_SIZE` messages. A subscriber too slow to keep up
(its mailbox full) loses its backlog and gets one `resync` ("refetch everything") instead;
so does everyone after an inbox overflow or a lost LISTEN connection (notifications sent
while it was away are gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import structlog

from codity.core.loop_service import LoopService
from codity.db.pool import connect
from codity.db.queries import sql
from codity.db.reconnect import wait_any

log = structlog.get_logger("codity.api.events")

CHANNEL = "codity_events"
#: How often summaries go out: at most 1/FLUSH_S messages per project per second.
FLUSH_S = 0.25
#: Payloads waiting for the next flush; past this, everything is dropped and everyone resyncs.
INBOX_LIMIT = 10_000
#: Messages a subscriber may have waiting before it is told to resync instead.
MAILBOX_SIZE = 16
#: Job ids a summary names (enough for the rows on screen; the rest is "refetch").
MAX_JOB_IDS = 50
#: Queue -> project entries kept (queues are few; a bound all the same).
CACHE_LIMIT = 100_000
#: A quiet listening connection is checked this often for being closed underneath us.
LIVENESS_CHECK_S = 5.0
#: Pause before reconnecting a lost listener (the loop service backs off from there).
RECONNECT_MS = 100
#: While it has subscribers a hub keeps the database's job events on this far ahead ...
WATCH_S = 30
#: ... renewed this often (well inside WATCH_S, so a slow renewal never lets them lapse).
WATCH_REFRESH_S = 10


@dataclass(frozen=True)
class Event:
    """One server-sent event: `event: <kind>` and its JSON `data`."""

    kind: str
    data: dict[str, Any]

    def encode(self) -> bytes:
        return (
            f"event: {self.kind}\ndata: {json.dumps(self.data, separators=(',', ':'))}\n\n".encode()
        )


RESYNC = "resync"


class Subscription:
    """A browser's mailbox: the hub puts, the response stream takes."""

    def __init__(self, project_id: UUID) -> None:
        self.project_id = project_id
        self._queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=MAILBOX_SIZE)
        self.dropped = 0

    def offer(self, event: Event) -> None:
        """Never blocks: a full mailbox is emptied and replaced by one resync."""
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            while not self._queue.empty():
                self._queue.get_nowait()
            self._queue.put_nowait(Event(RESYNC, {"reason": "too slow: messages were dropped"}))

    async def next(self, timeout_s: float) -> Event | None:
        """The next event, or None after `timeout_s` (time for a keep-alive)."""
        try:
            return await asyncio.wait_for(self._queue.get(), timeout_s)
        except TimeoutError:
            return None

    @property
    def backlog(self) -> int:
        return self._queue.qsize()


@dataclass
class _Summary:
    """Everything that happened to one project since the last flush."""

    changes: int = 0
    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    job_ids: list[int] = field(default_factory=list)
    truncated: bool = False
    workers: dict[str, str] = field(default_factory=dict)
    paused: dict[str, bool] = field(default_factory=dict)
    refresh_all: bool = False

    def add_jobs(self, queue_id: str, status: str, n: int, ids: list[int]) -> None:
        self.changes += n
        per_status = self.queues.setdefault(queue_id, {})
        per_status[status] = per_status.get(status, 0) + n
        room = MAX_JOB_IDS - len(self.job_ids)
        if len(ids) > room or len(ids) < n:
            self.truncated = True
        self.job_ids.extend(ids[: max(0, room)])

    def events(self) -> list[Event]:
        out = []
        if self.changes or self.refresh_all:
            out.append(
                Event(
                    "jobs",
                    {
                        "changes": self.changes,
                        "queues": self.queues,
                        "job_ids": sorted(set(self.job_ids)),
                        "truncated": self.truncated or self.refresh_all,
                    },
                )
            )
        if self.workers:
            out.append(
                Event(
                    "workers",
                    {"workers": [{"id": k, "status": v} for k, v in self.workers.items()]},
                )
            )
        if self.paused:
            out.append(
                Event(
                    "queues",
                    {"queues": [{"id": k, "is_paused": v} for k, v in self.paused.items()]},
                )
            )
        return out


class EventHub:
    def __init__(self, database_url: str, pool: Any, *, flush_s: float = FLUSH_S) -> None:
        self.database_url = database_url
        self.pool = pool
        self.flush_s = flush_s
        self._subscribers: dict[UUID, set[Subscription]] = {}
        self._inbox: deque[str] = deque()
        self._overflowed = False
        self._queue_projects: dict[str, UUID] = {}
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._listener: _Listener | None = None
        self._flusher: _Flusher | None = None
        self.listening = asyncio.Event()
        #: Counters for the benchmark and the logs.
        self.notifications = 0
        self.sent = 0
        #: When (time.monotonic()) this hub last turned the database's job events on.
        self._watch_set = -float("inf")

    # --- lifecycle: two loops of the project's one LoopService shape ---------------------------

    async def start(self) -> None:
        self._listener = _Listener(self)
        self._flusher = _Flusher(self)
        self._tasks = [
            asyncio.create_task(self._listener.run(self._stop), name="events-listen"),
            asyncio.create_task(self._flusher.run(self._stop), name="events-flush"),
        ]

    async def stop(self) -> None:
        self._stop.set()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, 5)

    # --- subscribers -----------------------------------------------------------------------

    @contextlib.contextmanager
    def subscribe(self, project_id: UUID) -> Iterator[Subscription]:
        sub = Subscription(project_id)
        self._subscribers.setdefault(project_id, set()).add(sub)
        try:
            yield sub
        finally:
            subs = self._subscribers.get(project_id)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del self._subscribers[project_id]

    async def watch(self) -> None:
        """Keep the database's job events on for WATCH_S more seconds (migration 0024), unless
        this hub did so less than WATCH_REFRESH_S ago. Awaited before a new subscriber's
        stream begins, so every change after its `hello` is announced."""
        now = time.monotonic()
        if now - self._watch_set < WATCH_REFRESH_S:
            return
        await self.pool.execute(sql("event_watch"), WATCH_S)
        self._watch_set = now

    @property
    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    def _resync_everyone(self, reason: str) -> None:
        for subs in self._subscribers.values():
            for sub in subs:
                sub.offer(Event(RESYNC, {"reason": reason}))

    # --- the LISTEN connection --------------------------------------------------------------

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.notifications += 1
        if len(self._inbox) >= INBOX_LIMIT:
            self._inbox.clear()
            self._overflowed = True
        self._inbox.append(payload)

    # --- flushing ---------------------------------------------------------------------------

    async def flush(self) -> None:
        if self._overflowed:
            self._overflowed = False
            self._resync_everyone("too many changes at once")
        if not self._inbox:
            return
        payloads = list(self._inbox)
        self._inbox.clear()
        if not self._subscribers:
            return  # nobody listens: nothing to resolve or build
        parsed = [_parse(p) for p in payloads]
        try:
            summaries = await self._summarise([p for p in parsed if p is not None])
        except Exception:
            # These changes cannot be attributed (the database is away): refetch everything.
            self._resync_everyone("live updates interrupted")
            raise
        for project_id, summary in summaries.items():
            subs = self._subscribers.get(project_id)
            if not subs:
                continue
            for event in summary.events():
                for sub in list(subs):
                    sub.offer(event)
                    self.sent += 1

    async def _summarise(self, messages: list[dict[str, Any]]) -> dict[UUID, _Summary]:
        summaries: dict[UUID, _Summary] = {}
        everything = any(m.get("t") == "j" and m.get("c") == "*" for m in messages)
        queue_ids = {
            str(group[0])
            for m in messages
            if m.get("t") == "j" and isinstance(m.get("c"), list)
            for group in m["c"]
        }
        await self._learn_queues(queue_ids - self._queue_projects.keys())
        worker_ids = [str(m["w"]) for m in messages if m.get("t") == "w" and "w" in m]
        worker_projects = await self._worker_projects(worker_ids) if worker_ids else {}

        def summary(project_id: UUID) -> _Summary:
            return summaries.setdefault(project_id, _Summary())

        if everything:
            for project_id in self._subscribers:
                summary(project_id).refresh_all = True
        for m in messages:
            kind = m.get("t")
            if kind == "j" and isinstance(m.get("c"), list):
                for queue_id, status, n, ids in m["c"]:
                    project = self._queue_projects.get(str(queue_id))
                    if project is not None:
                        summary(project).add_jobs(
                            str(queue_id), str(status), int(n), list(ids or [])
                        )
            elif kind == "w":
                for project in worker_projects.get(str(m.get("w")), ()):
                    summary(project).workers[str(m["w"])] = str(m.get("s"))
            elif kind == "q" and m.get("p"):
                with contextlib.suppress(ValueError):
                    summary(UUID(str(m["p"]))).paused[str(m["q"])] = bool(m.get("paused"))
        return summaries

    async def _learn_queues(self, unknown: set[str]) -> None:
        if not unknown:
            return
        if len(self._queue_projects) > CACHE_LIMIT:
            self._queue_projects.clear()
        rows = await self.pool.fetch(sql("event_queue_projects"), sorted(unknown))
        for r in rows:
            self._queue_projects[str(r["id"])] = r["project_id"]

    async def _worker_projects(self, worker_ids: list[str]) -> dict[str, set[UUID]]:
        rows = await self.pool.fetch(sql("event_worker_projects"), sorted(set(worker_ids)))
        out: dict[str, set[UUID]] = {}
        for r in rows:
            out.setdefault(str(r["worker_id"]), set()).add(r["project_id"])
        return out


class _Listener(LoopService):
    """One iteration = one connection's life: connect, LISTEN, wait until it is lost or the API
    stops. The loop service reconnects with backoff; after a reconnection every subscriber is
    told to resync, since notifications sent meanwhile are gone."""

    name = "events-listen"

    def __init__(self, hub: EventHub) -> None:
        super().__init__(None, interval_ms=RECONNECT_MS)
        self.hub = hub
        self._lost_before = False

    async def run_once(self) -> bool:
        conn = await connect(self.hub.database_url, application_name="codity-api-events")
        try:
            await conn.add_listener(CHANNEL, self.hub._on_notify)
            lost = asyncio.Event()
            conn.add_termination_listener(lambda _c: lost.set())
            if self._lost_before:
                self.hub._resync_everyone("live updates reconnected")
                log.info("events listener reconnected")
            self.hub.listening.set()
            while not self.stopping.is_set() and not lost.is_set() and not conn.is_closed():
                await wait_any(self.stopping, lost, timeout_s=LIVENESS_CHECK_S)
                if not lost.is_set() and not conn.is_closed() and not self.stopping.is_set():
                    await conn.execute(sql("event_listener_ping"))
        finally:
            self.hub.listening.clear()
            if not conn.is_closed():
                try:
                    await asyncio.wait_for(conn.close(), timeout=2)
                except Exception:
                    conn.terminate()
        if not self.stopping.is_set():
            self._lost_before = True
            log.warning("events listener lost its connection; reconnecting")
        return False


class _Flusher(LoopService):
    name = "events-flush"

    def __init__(self, hub: EventHub) -> None:
        super().__init__(None, interval_ms=max(1, int(hub.flush_s * 1000)))
        self.hub = hub

    async def run_once(self) -> bool:
        if self.hub.subscriber_count:
            await self.hub.watch()
        await self.hub.flush()
        return False


def _parse(payload: str) -> dict[str, Any] | None:
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def stream(
    sub: Subscription, *, keepalive_s: float, max_s: float, flush_ms: int
) -> AsyncIterator[bytes]:
    """The bytes of one event stream: a hello, then events, keep-alive comments while quiet,
    and a `bye` when the stream's lifetime is up (the client reconnects, re-authenticating)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_s
    yield b"retry: 2000\n\n"
    yield Event("hello", {"project_id": str(sub.project_id), "flush_ms": flush_ms}).encode()
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            yield Event("bye", {"reason": "stream lifetime reached; reconnect"}).encode()
            return
        event = await sub.next(min(keepalive_s, remaining))
        yield b": keep-alive\n\n" if event is None else event.encode()
