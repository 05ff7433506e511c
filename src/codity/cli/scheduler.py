"""`codity scheduler`: the promoter, cron, reaper, dead-worker sweep and pruner loops."""

from __future__ import annotations

from codity.cli._common import database_url, friendly_errors, settings
from codity.cli._service import run_until_signalled, setup_logging
from codity.scheduler import SchedulerConfig, run_scheduler


@friendly_errors
def scheduler_command() -> None:
    """Run the scheduler loops. Safe to run several at once (no leader). SIGTERM stops it."""
    cfg = settings()
    setup_logging(cfg, "scheduler")
    with database_url() as url:
        config = SchedulerConfig.from_settings(cfg, database_url=url)
        run_until_signalled(lambda stop: run_scheduler(config, stop))
