"""The producer: claims jobs sized to the worker's free slots, across all its queues at once.

One `core.claim` statement per round (every queue the worker serves; pauses and limits read
inside it). It never holds more jobs than the worker has free slots, so a job is never leased to
a worker that cannot start it at once. It wakes on a NOTIFY for one of its queues, on a freed
slot, or on the poll timer (the fallback); when a claim filled every free slot it claims again
as soon as a slot frees.

Each claim of a queue starts where this producer's previous claim of it ended (a
`core.ClaimCursor`): the index entries of the jobs it already took are skipped instead of
stepped over, which keeps claims cheap while a long transaction stops vacuum from removing
them. Every CURSOR_RESCAN_S one claim reads from the front of the index again, so a job that
came back with an older key (released, reaped, promoted) waits at most that long - unless that
read is slow: under a held snapshot it steps over every dead entry, and it grows with the
snapshot's age (a second after a minute at 3,000 jobs/s). Once it took longer than the interval
every claim became one and the drain collapsed (`codity bench xmin`: enqueue->start p99 35 s,
throughput 0.73x). So the next one waits at least RESCAN_COST_SHARE times as long as the last
took (`RescanClock`): full reads cost at most 1/RESCAN_COST_SHARE of the producer's time.

Flow control lives in the claim (docs/CONCURRENCY.md); the producer claims through one
`core.Claimer` (which statement runs first) and only says whether to share between projects
(`fair`: its queues span several projects and WORKER_FAIR_SHARES is on). When a rate limit held
a claim back, it wakes itself when the claim says the next start frees up instead of at the poll
interval.

A freed slot wakes the producer only while a claim could use it (`slot_freed`): after a claim
that filled every free slot, or that left a queue with jobs it may still claim (at its
concurrency limit, or with flow control), or a wake-up that found no free slot. After a claim
that drained every queue (claim.sql's `drained`) it waits for a NOTIFY or the poll: at a
trickle of jobs, the empty claim each finished job set off made the next job's claim wait
behind it (`codity bench latency` at 2,000/s: 1.3-1.4 claims per job, half the claim time
of a p50 spent waiting for one). A claim that drained its queues after their cursors sets a
timer for the next claim without them: a job behind a cursor (a promoted job with an older
run_at, say) is then found within CURSOR_RESCAN_S, not at the poll (CI saw a promoted job
wait out a 30 s poll).

A worker serving every queue looks for new queues every `queue_refresh_ms`, and at once when a
NOTIFY names a queue it does not know (`queue_unknown`, at most once per NEW_QUEUE_REFRESH_GAP_S):
a new tenant's first job otherwise waited out the refresh, up to 10 s (CI saw it).

A claim and a heartbeat never overlap (`claim_lock`): the heartbeat gives back jobs leased under
this worker's id that the worker does not hold, and a job whose claim reply is still on its way
is not held yet. Holding the lock until the claimed jobs are registered closes that race; a
claim whose reply never arrives (the connection died after the commit) leaves its jobs to the
next heartbeat, which gives them back at once.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from uuid import UUID

from codity import core
from codity.core.loop_service import LoopService
from codity.worker.connection import HeldConnection
from codity.worker.executor import Executor

#: How often a claim ignores its cursors and reads each queue from the front of the index.
CURSOR_RESCAN_S = 1.0
#: ... but never sooner than this many times the last such claim's duration after it began.
RESCAN_COST_SHARE = 20
#: A NOTIFY for a queue the worker does not know sets off a refresh at most this often.
NEW_QUEUE_REFRESH_GAP_S = 1.0


class RescanClock:
    """When the producer's next claim reads from the front of the index (no cursors)."""

    def __init__(self) -> None:
        self._next = -math.inf

    def due(self, now: float) -> bool:
        return now >= self._next

    def due_in(self, now: float) -> float:
        """Seconds until the next claim without cursors is due (0 when it is)."""
        return max(0.0, self._next - now)

    def ran(self, started: float, took_s: float) -> None:
        """A claim without cursors began at `started` and took `took_s`."""
        self._next = started + max(CURSOR_RESCAN_S, RESCAN_COST_SHARE * took_s)


class Producer(LoopService):
    name = "producer"

    def __init__(
        self,
        conn: HeldConnection,
        *,
        flow_first: bool = False,
        worker_id: UUID,
        capacity: int,
        lease_ms: int,
        poll_interval_ms: int,
        busy: Callable[[], int],
        queue_ids: Callable[[], list[UUID]],
        fair: Callable[[], bool],
        running_by_queue: Callable[[], Mapping[UUID, int]],
        refresh_queues: Callable[[], Awaitable[None]] | None,
        queue_refresh_ms: int,
        executor: Executor,
        claim_lock: asyncio.Lock,
        wake: asyncio.Event,
    ) -> None:
        super().__init__(conn, interval_ms=poll_interval_ms, wake=wake)
        self.held = conn
        self._worker_id = worker_id
        self._capacity = capacity
        self._lease_ms = lease_ms
        self._busy = busy
        self._queue_ids = queue_ids
        self._refresh_queues = refresh_queues
        self._refresh_s = queue_refresh_ms / 1000
        self._last_refresh = time.monotonic()  # the service resolved its queues just before
        self._next_refresh = self._last_refresh + self._refresh_s
        self._executor = executor
        self._claim_lock = claim_lock
        self._cursors: dict[UUID, core.ClaimCursor] = {}
        self._fair = fair
        self._running_by_queue = running_by_queue
        self._claimer = core.Claimer(worker_id, lease_ms, flow_first=flow_first)
        self._retry_timer: asyncio.TimerHandle | None = None
        self._rescan = RescanClock()
        self.claims = 0
        #: A freed slot may find a job to claim (see the module's docstring).
        self.wants_slots = True

    def slot_freed(self) -> None:
        """The executor finished an attempt: claim again if a claim could use the slot."""
        if self.wants_slots and self.wake is not None:
            self.wake.set()

    def queue_unknown(self) -> None:
        """A NOTIFY named a queue this worker does not know, probably one created since the
        last refresh: look for new queues now, or NEW_QUEUE_REFRESH_GAP_S after the last look
        (a queue that notifies but is not served must not set off a lookup per job)."""
        if self._refresh_queues is None or self.wake is None:
            return
        now = time.monotonic()
        at = max(now, self._last_refresh + NEW_QUEUE_REFRESH_GAP_S)
        if at >= self._next_refresh:
            return  # a refresh is due by then anyway
        self._next_refresh = at
        if at <= now:
            self.wake.set()
        else:  # its own timer: _wake_in's would replace a rate limit's
            asyncio.get_running_loop().call_later(at - now, self.wake.set)

    def on_error(self, exc: Exception) -> None:
        self.held.discard()  # it may be broken mid-operation: the next round reconnects

    async def run_once(self) -> bool:
        if self._refresh_queues is not None and time.monotonic() >= self._next_refresh:
            self._last_refresh = time.monotonic()
            self._next_refresh = self._last_refresh + self._refresh_s
            await self._refresh_queues()
        free = self._capacity - self._busy()
        queue_ids = self._queue_ids()
        if free <= 0 or not queue_ids:
            self.wants_slots = True  # woken with every slot busy: claim when one frees
            return False
        conn = await self.held.get()
        now = time.monotonic()  # before the claim is sent: its leases run from later
        rescan = self._rescan.due(now)
        async with self._claim_lock:
            started = time.monotonic()
            fair = self._fair()
            claimed = await self._claimer.claim(
                conn,
                queue_ids,
                free,
                fair=fair,
                cursors=None if rescan else self._cursors,
                # what it runs per queue: the fair shares weigh it (and publish it) instead of
                # counting the leased jobs in the table
                held=self._running_by_queue() if fair else None,
            )
            self.claims += 1
            if rescan:
                self._rescan.ran(started, time.monotonic() - started)
            if claimed.jobs:
                # in hand before the lock is released
                self._executor.start(claimed.jobs, lease_deadline=now + self._lease_ms / 1000)
        core.advance_cursors(self._cursors, claimed)
        self.wants_slots = not claimed.drained
        if claimed.retry_in_ms is not None and len(claimed.jobs) < free:
            self._wake_in(claimed.retry_in_ms / 1000)
        elif claimed.drained and not rescan:
            # Drained only after the cursors: a job behind one (promoted, released, reaped)
            # is found by the next claim without them, which nothing else may set off before
            # the poll (no freed slot wakes a drained producer).
            self._wake_in(self._rescan.due_in(time.monotonic()))
        # Filled every free slot: more work is probably waiting; claim again once slots free.
        return False

    def _wake_in(self, delay_s: float) -> None:
        """Run again in `delay_s` (if before the poll): when a rate-limited queue's next start
        frees up, or when a claim without cursors is due after a drained one."""
        if self.wake is None or delay_s >= self.interval_s:
            return
        if self._retry_timer is not None:
            self._retry_timer.cancel()
        self._retry_timer = asyncio.get_running_loop().call_later(delay_s, self.wake.set)
