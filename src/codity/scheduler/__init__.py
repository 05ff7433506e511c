"""The scheduler: cluster-wide loops (promoter, cron, reaper, dead-worker sweep, pruner), each a
`LoopService` (codity.core.loop_service, shared with the worker), safe with any number of replicas and no leader."""

from __future__ import annotations

from codity.core.loop_service import LoopService
from codity.scheduler.runner import SchedulerConfig, build_services, run_scheduler

__all__ = ["LoopService", "SchedulerConfig", "build_services", "run_scheduler"]
