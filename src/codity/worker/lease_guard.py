"""The lease guard: an attempt whose lease the worker could not renew in time is stopped.

When the database is unreachable for longer than the lease (an outage, a partition), the
heartbeat cannot extend the leases of the jobs the worker runs, and once they expire the
reaper (any scheduler replica, on the database's clock) gives those jobs to other workers.
The handler still running here would then run beside the new attempt. So the worker does not
wait to hear that the lease is gone: by its own clock, at the moment the lease surely still
held until (`RunningJob.lease_deadline`: when the claim or the last extending heartbeat was
sent, plus the lease — earlier than the database's own expiry), it cancels the attempt (async
handlers) or discards its outcome (sync handlers, whose thread cannot be stopped: it keeps its
slot while it lingers), exactly as for a lease reported lost, and records nothing. No database
call: it must work while the database is away.
"""

from __future__ import annotations

import time

import structlog

from codity.core.loop_service import LoopService
from codity.worker.executor import Executor
from codity.worker.running import Running

log = structlog.get_logger("codity.worker")

#: Checks per lease period (the guard runs at least this often within one lease).
CHECKS_PER_LEASE = 20


class LeaseGuard(LoopService):
    name = "lease-guard"

    def __init__(self, *, running: Running, executor: Executor, lease_ms: int) -> None:
        super().__init__(None, interval_ms=max(10, lease_ms // CHECKS_PER_LEASE))
        self._running = running
        self._executor = executor
        self.expired = 0

    async def run_once(self) -> bool:
        now = time.monotonic()
        late = [
            rj
            for rj in self._running.jobs.values()
            if not rj.lease_lost and rj.lease_deadline <= now
        ]
        if late:
            self.expired += len(late)
            log.warning(
                "leases not renewed in time (database unreachable?); stopping their attempts",
                job_ids=[rj.job.id for rj in late],
            )
            for rj in late:
                self._executor.lose(rj.job.fence)
        return False
