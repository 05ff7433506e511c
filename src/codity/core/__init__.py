"""codity.core: every change of a job's state goes through here.

The worker, the scheduler and the API call these functions; they never write job-state SQL of
their own. Each takes `conn`, an asyncpg Connection or Pool;
enqueue also takes psycopg 3 and SQLAlchemy connections (see `core/drivers.py`). The hot-path SQL lives in
`codity/db/sql/*.sql`; `docs/CONCURRENCY.md` explains the protocol and names the test that
proves each guarantee.
"""

from __future__ import annotations

from codity.core.bulk import cancel_jobs as bulk_cancel_jobs
from codity.core.bulk import delete_jobs as bulk_delete_jobs
from codity.core.bulk import retry_jobs as bulk_retry_jobs
from codity.core.claim import (
    ClaimCursor,
    ClaimedJob,
    Claimer,
    ClaimRound,
    advance_cursors,
    claim,
    claim_round,
)
from codity.core.connection import Conn, transaction
from codity.core.cron import materialise_cron, occurrence_key
from codity.core.dlq import discard_dead_letters, replay_dead_letters, replay_queue_dead_letters
from codity.core.drain import cancel_drain, finish_drains, refuse_if_draining, start_drain
from codity.core.enqueue import (
    INSERT_CHUNK,
    NOTIFY_CHANNEL,
    EnqueuedJob,
    NewJob,
    QueueRef,
    check_new_job,
    enqueue,
    enqueue_many,
    enqueue_many_sync,
    enqueue_sync,
    notify_queues,
)
from codity.core.fence import BatchResult, Fence
from codity.core.lease import (
    HeartbeatResult,
    LogEntry,
    append_logs,
    heartbeat,
    mark_running,
    report_progress,
)
from codity.core.maintenance import (
    PruneResult,
    promote_due,
    prune,
    reap_expired,
    sweep_dead_workers,
)
from codity.core.operations import cancel_job, retry_job
from codity.core.outcomes import Completion, Failure, complete, fail, release
from codity.core.queues import (
    QueueInfo,
    pause_queue,
    resolve_queue,
    resolve_worker_queues,
    resume_queue,
)
from codity.core.quotas import EnqueueLimits
from codity.core.stats import RollupResult, rollup_stats
from codity.core.workers import register_worker, set_worker_status

__all__ = [
    "INSERT_CHUNK",
    "NOTIFY_CHANNEL",
    "BatchResult",
    "ClaimCursor",
    "ClaimRound",
    "ClaimedJob",
    "Claimer",
    "Completion",
    "Conn",
    "EnqueueLimits",
    "EnqueuedJob",
    "Failure",
    "Fence",
    "HeartbeatResult",
    "LogEntry",
    "NewJob",
    "PruneResult",
    "QueueInfo",
    "QueueRef",
    "RollupResult",
    "advance_cursors",
    "append_logs",
    "bulk_cancel_jobs",
    "bulk_delete_jobs",
    "bulk_retry_jobs",
    "cancel_drain",
    "cancel_job",
    "check_new_job",
    "claim",
    "claim_round",
    "complete",
    "discard_dead_letters",
    "enqueue",
    "enqueue_many",
    "enqueue_many_sync",
    "enqueue_sync",
    "fail",
    "finish_drains",
    "heartbeat",
    "mark_running",
    "materialise_cron",
    "notify_queues",
    "occurrence_key",
    "pause_queue",
    "promote_due",
    "prune",
    "reap_expired",
    "refuse_if_draining",
    "register_worker",
    "release",
    "replay_dead_letters",
    "replay_queue_dead_letters",
    "report_progress",
    "resolve_queue",
    "resolve_worker_queues",
    "resume_queue",
    "retry_job",
    "rollup_stats",
    "set_worker_status",
    "start_drain",
    "sweep_dead_workers",
    "transaction",
]
