"""Demo data: what the dashboard shows on a fresh `codity db demo`.

One organisation with an owner and a viewer, one project, three queues with differing retry
policies (fixed, linear, exponential), a cron schedule firing every minute, an hour of
completed work with execution rows (so throughput charts have data), jobs whose retry history
shows failed attempts before a success, a few queued and scheduled jobs, and dead-lettered jobs.

Plain SQL through asyncpg on purpose: this module sits in the db layer and must not depend on
`codity.core`. Rows are inserted directly in their final status (the lifecycle trigger guards
UPDATEs of status, not INSERTs), all in one transaction so a failure leaves nothing behind.

Counts never depend on the clock or on chance: the history is generated from a fixed seed and
only the timestamps move with `now()`. Running the seed twice on a reset database therefore
gives the same rows per table.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from codity import VERSION
from codity.domain.passwords import hash_password

DEMO_ORG_NAME = "Codity Demo"
DEMO_ORG_SLUG = "codity-demo"
DEMO_PROJECT_NAME = "Demo"
DEMO_PROJECT_SLUG = "demo"
DEMO_PASSWORD = "correct-horse-battery-staple"  # noqa: S105 - the documented demo login
OPERATOR_EMAIL = "operator@codity.test"
VIEWER_EMAIL = "viewer@codity.test"

#: Fixed seed for the generated history: same rows (and so same counts) on every run.
HISTORY_SEED = 20_26
#: Completed jobs spread over the last hour.
COMPLETED_JOBS = 96
HISTORY_WINDOW = timedelta(hours=1)
#: Minutes of compact heartbeat history for the worker that did that work.
HEARTBEAT_MINUTES = 60


@dataclass(frozen=True)
class PolicySpec:
    name: str
    strategy: str
    base_delay_ms: int
    max_delay_ms: int
    max_attempts: int


@dataclass(frozen=True)
class QueueSpec:
    name: str
    description: str
    policy: str
    priority: int = 0
    concurrency_limit: int | None = None


POLICIES = (
    PolicySpec("fixed-5s", "fixed", 5_000, 5_000, 3),
    PolicySpec("linear-10s", "linear", 10_000, 120_000, 4),
    PolicySpec("exponential-2s", "exponential", 2_000, 300_000, 5),
)

QUEUES = (
    QueueSpec("emails", "Transactional email: receipts, password resets, digests.", "fixed-5s", 10),
    QueueSpec("reports", "Scheduled and on-demand report generation.", "linear-10s", 0),
    QueueSpec(
        "webhooks",
        "Outbound HTTP callbacks to customer endpoints.",
        "exponential-2s",
        5,
        concurrency_limit=5,
    ),
)

SCHEDULE_NAME = "throughput-report-every-minute"
SCHEDULE_CRON = "* * * * *"
SCHEDULE_HANDLER = "report.generate"
SCHEDULE_QUEUE = "reports"


@dataclass(frozen=True)
class Attempt:
    """One finished attempt: becomes a job_executions row."""

    status: str  # execution_status
    started_at: datetime
    duration_ms: int
    error: str | None = None

    @property
    def finished_at(self) -> datetime:
        return self.started_at + timedelta(milliseconds=self.duration_ms)


@dataclass
class DemoJob:
    queue: str
    handler: str
    payload: dict[str, Any]
    status: str  # job_status, inserted as-is
    created_at: datetime
    run_at: datetime
    priority: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    result: dict[str, Any] | None = None
    dead_letter_reason: str | None = None
    logs: list[tuple[str, str]] = field(default_factory=list)  # (level, message)
    from_schedule: bool = False

    @property
    def finished_at(self) -> datetime | None:
        if self.status in ("completed", "dead_letter") and self.attempts:
            return self.attempts[-1].finished_at
        if self.status == "cancelled":
            return self.created_at + timedelta(seconds=30)
        return None

    @property
    def last_error(self) -> str | None:
        errors = [a.error for a in self.attempts if a.error]
        return errors[-1] if errors else None


# --- believable payloads -------------------------------------------------------------------

_RECIPIENTS = ("ada", "grace", "linus", "margaret", "ken", "barbara", "dennis", "frances")
_EMAIL_TEMPLATES = ("receipt", "password-reset", "weekly-digest", "welcome")
_REPORTS = ("throughput", "failures-by-queue", "monthly-usage", "latency-percentiles")
_HOOKS = ("orders", "invoices", "shipments", "subscriptions")


def _email_payload(rng: random.Random, n: int) -> dict[str, Any]:
    name = rng.choice(_RECIPIENTS)
    template = rng.choice(_EMAIL_TEMPLATES)
    return {
        "to": f"{name}@example.com",
        "subject": f"Your {template.replace('-', ' ')} #{1000 + n}",
        "template": template,
        "text": f"Hello {name.title()}, this is message #{1000 + n}.",
    }


def _report_payload(rng: random.Random, n: int) -> dict[str, Any]:
    # `window_hours` is what the report.generate handler reads; the rest labels the run.
    return {"report": rng.choice(_REPORTS), "window_hours": rng.choice((1, 24)), "run": n}


def _webhook_payload(rng: random.Random, n: int) -> dict[str, Any]:
    hook = rng.choice(_HOOKS)
    return {
        "url": f"https://example.com/hooks/{hook}",
        "method": "POST",
        "json": {"event": f"{hook[:-1]}.updated", "id": 5000 + n},
    }


# (queue, handler, payload maker) in the proportions the completed history uses.
_MIX = (
    ("emails", "email.send", _email_payload),
    ("emails", "email.send", _email_payload),
    ("webhooks", "http_request", _webhook_payload),
    ("webhooks", "http_request", _webhook_payload),
    ("reports", "report.generate", _report_payload),
    ("reports", "noop", lambda _rng, n: {"ping": n}),
)

_TRANSIENT_ERRORS = {
    "email.send": "SMTPServerDisconnected: 421 4.7.0 Try again later, closing connection",
    "http_request": "HTTPStatusError: 503 Service Unavailable from https://example.com/hooks/orders",
    "report.generate": "TimeoutError: report query exceeded 30000 ms",
}


def _policy_for(queue: str) -> PolicySpec:
    spec = next(q for q in QUEUES if q.name == queue)
    return next(p for p in POLICIES if p.name == spec.policy)


def _backoff_ms(policy: PolicySpec, attempt: int) -> int:
    """The un-jittered delay before the next attempt; only used to space seeded timestamps."""
    if policy.strategy == "fixed":
        delay = policy.base_delay_ms
    elif policy.strategy == "linear":
        delay = policy.base_delay_ms * attempt
    else:
        delay = policy.base_delay_ms * 2 ** (attempt - 1)
    return min(delay, policy.max_delay_ms)


def _retried(queue: str, handler: str, failures: int, start: datetime) -> list[Attempt]:
    """`failures` failed attempts, each followed by the queue's (un-jittered) backoff delay."""
    policy = _policy_for(queue)
    attempts: list[Attempt] = []
    at = start
    for n in range(1, failures + 1):
        attempts.append(Attempt("failed", at, 180 + 40 * n, _TRANSIENT_ERRORS.get(handler)))
        at = attempts[-1].finished_at + timedelta(milliseconds=_backoff_ms(policy, n))
    return attempts


def build_demo_jobs(now: datetime) -> list[DemoJob]:
    """Every demo job with its attempts, as data. Same list (up to `now`) on every call."""
    rng = random.Random(HISTORY_SEED)
    jobs: list[DemoJob] = []
    step = HISTORY_WINDOW / COMPLETED_JOBS

    # An hour of completed work, one job every ~37 s, oldest first.
    for i in range(COMPLETED_JOBS):
        queue, handler, make_payload = _MIX[i % len(_MIX)]
        created = now - HISTORY_WINDOW + step * i + timedelta(seconds=rng.uniform(0, 5))
        started = created + timedelta(milliseconds=rng.randint(5, 400))
        duration = rng.randint(20, 900) if handler != "report.generate" else rng.randint(800, 4000)
        job = DemoJob(
            queue=queue,
            handler=handler,
            payload=make_payload(rng, i),
            status="completed",
            created_at=created,
            run_at=created,
            priority=rng.choice((0, 0, 0, 5)),
            attempts=[Attempt("completed", started, duration)],
            result={"ok": True, "duration_ms": duration},
            from_schedule=handler == SCHEDULE_HANDLER,
        )
        jobs.append(job)

    # Retry history: failed attempts (spaced by each queue's backoff) before a success.
    for i, (queue, handler, make_payload, failures) in enumerate(
        (
            ("webhooks", "http_request", _webhook_payload, 3),
            ("webhooks", "http_request", _webhook_payload, 2),
            ("webhooks", "http_request", _webhook_payload, 1),
            ("emails", "email.send", _email_payload, 2),
            ("emails", "email.send", _email_payload, 1),
            ("reports", "report.generate", _report_payload, 2),
        )
    ):
        created = now - timedelta(minutes=50 - 7 * i)
        payload = make_payload(rng, 200 + i)
        attempts = _retried(queue, handler, failures, created)
        success_at = attempts[-1].finished_at + timedelta(
            milliseconds=_backoff_ms(_policy_for(queue), failures)
        )
        attempts.append(Attempt("completed", success_at, 250 + 30 * i))
        jobs.append(
            DemoJob(
                queue=queue,
                handler=handler,
                payload=payload,
                status="completed",
                created_at=created,
                run_at=success_at,
                attempts=attempts,
                result={"ok": True, "after_failures": failures},
                logs=[("warning", f"attempt {n} failed, retrying") for n in range(1, failures + 1)]
                + [("info", "succeeded")],
            )
        )

    # Dead letters: every attempt failed. Handler `noop`, so a replay completes when a worker
    # runs it (the recorded failures stand for an outage that has since been fixed).
    for i, queue in enumerate(("webhooks", "webhooks", "emails")):
        policy = _policy_for(queue)
        created = now - timedelta(minutes=45 - 10 * i)
        reason = (
            "ConnectionRefusedError: downstream billing service unreachable "
            f"(outage drill #{i + 1})"
        )
        attempts = [
            Attempt(a.status, a.started_at, a.duration_ms, reason)
            for a in _retried(queue, "noop", policy.max_attempts, created)
        ]
        jobs.append(
            DemoJob(
                queue=queue,
                handler="noop",
                payload={"order_id": 7100 + i, "note": "replay me: the outage is over"},
                status="dead_letter",
                created_at=created,
                run_at=attempts[-1].started_at,
                attempts=attempts,
                dead_letter_reason=reason,
                logs=[("error", f"attempt {n} failed") for n in range(1, len(attempts) + 1)],
            )
        )

    # Claimable now: a worker started after the seed picks these up at once.
    for i, (queue, handler, make_payload) in enumerate(
        (
            ("emails", "email.send", _email_payload),
            ("emails", "email.send", _email_payload),
            ("emails", "email.send", _email_payload),
            ("reports", "report.generate", _report_payload),
            ("reports", "noop", lambda _rng, n: {"ping": n}),
        )
    ):
        created = now - timedelta(seconds=20 - 3 * i)
        jobs.append(DemoJob(queue, handler, make_payload(rng, 300 + i), "queued", created, created))

    # Delayed: future run_at, promoted by the scheduler when due. One is a retry in backoff.
    for i, (queue, handler, make_payload, delay) in enumerate(
        (
            ("emails", "email.send", _email_payload, timedelta(minutes=15)),
            ("reports", "report.generate", _report_payload, timedelta(hours=1)),
            ("reports", "report.generate", _report_payload, timedelta(hours=6)),
        )
    ):
        jobs.append(
            DemoJob(queue, handler, make_payload(rng, 400 + i), "scheduled", now, now + delay)
        )
    backoff_created = now - timedelta(seconds=40)
    jobs.append(
        DemoJob(
            queue="webhooks",
            handler="http_request",
            payload=_webhook_payload(rng, 450),
            status="scheduled",
            created_at=backoff_created,
            run_at=now + timedelta(minutes=4),
            attempts=_retried("webhooks", "http_request", 1, backoff_created),
        )
    )

    # Cancelled before it ran.
    cancelled_at = now - timedelta(minutes=30)
    jobs.append(
        DemoJob(
            "reports", "report.generate", _report_payload(rng, 500), "cancelled", cancelled_at,
            cancelled_at + timedelta(hours=2),
        )
    )  # fmt: skip
    return jobs


# --- writing it ----------------------------------------------------------------------------


async def _insert_tenancy(conn: asyncpg.Connection[Any]) -> tuple[uuid.UUID, uuid.UUID]:
    org_id: uuid.UUID = await conn.fetchval(
        "INSERT INTO organizations (name, slug) VALUES ($1, $2) RETURNING id",
        DEMO_ORG_NAME,
        DEMO_ORG_SLUG,
    )
    for email, name, role in (
        (OPERATOR_EMAIL, "Demo Operator", "owner"),
        (VIEWER_EMAIL, "Demo Viewer", "viewer"),
    ):
        user_id = await conn.fetchval(
            # Verified: the demo login must work without a confirmation mail.
            """INSERT INTO users (email, password_hash, display_name, email_verified_at)
               VALUES ($1, $2, $3, now()) RETURNING id""",
            email,
            hash_password(DEMO_PASSWORD),
            name,
        )
        await conn.execute(
            "INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)",
            org_id,
            user_id,
            role,
        )
    project_id: uuid.UUID = await conn.fetchval(
        "INSERT INTO projects (org_id, name, slug) VALUES ($1, $2, $3) RETURNING id",
        org_id,
        DEMO_PROJECT_NAME,
        DEMO_PROJECT_SLUG,
    )
    return org_id, project_id


async def _insert_queues(
    conn: asyncpg.Connection[Any], project_id: uuid.UUID
) -> tuple[dict[str, uuid.UUID], dict[str, uuid.UUID]]:
    policy_ids: dict[str, uuid.UUID] = {}
    for p in POLICIES:
        policy_ids[p.name] = await conn.fetchval(
            """INSERT INTO retry_policies
                 (project_id, name, strategy, base_delay_ms, max_delay_ms, max_attempts)
               VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
            project_id,
            p.name,
            p.strategy,
            p.base_delay_ms,
            p.max_delay_ms,
            p.max_attempts,
        )
    queue_ids: dict[str, uuid.UUID] = {}
    for q in QUEUES:
        queue_ids[q.name] = await conn.fetchval(
            """INSERT INTO queues (project_id, name, description, priority, concurrency_limit,
                                   retry_policy_id, default_max_attempts)
               VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id""",
            project_id,
            q.name,
            q.description,
            q.priority,
            q.concurrency_limit,
            policy_ids[q.policy],
            _policy_for(q.name).max_attempts,
        )
    return policy_ids, queue_ids


async def _insert_worker(
    conn: asyncpg.Connection[Any], now: datetime, queue_ids: dict[str, uuid.UUID]
) -> uuid.UUID:
    """The worker that did the seeded history; stopped now, so it never looks alive."""
    started = now - HISTORY_WINDOW - timedelta(minutes=5)
    stopped = now - timedelta(seconds=10)
    worker_id: uuid.UUID = await conn.fetchval(
        """INSERT INTO workers (hostname, pid, version, capacity, queue_names, status,
                                started_at, last_heartbeat_at, stopped_at)
           VALUES ('demo-history', 4242, $1, 5, $2, 'stopped', $3, $4, $4) RETURNING id""",
        VERSION,
        sorted(queue_ids),
        started,
        stopped,
    )
    await conn.executemany(
        "INSERT INTO worker_queues (worker_id, queue_id) VALUES ($1, $2)",
        [(worker_id, qid) for qid in queue_ids.values()],
    )
    last_minute = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    await conn.executemany(
        """INSERT INTO worker_heartbeats (worker_id, minute, beats, max_in_flight)
           VALUES ($1, $2, 12, $3)""",
        [
            (worker_id, last_minute - timedelta(minutes=m), 1 + m % 4)
            for m in range(HEARTBEAT_MINUTES)
        ],
    )
    return worker_id


async def _insert_schedule(
    conn: asyncpg.Connection[Any], now: datetime, queue_id: uuid.UUID, owner_id: uuid.UUID
) -> uuid.UUID:
    next_minute = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    schedule_id: uuid.UUID = await conn.fetchval(
        """INSERT INTO scheduled_jobs (queue_id, name, cron_expression, timezone, handler, payload,
                                       next_run_at, created_by)
           VALUES ($1, $2, $3, 'UTC', $4, $5, $6, $7) RETURNING id""",
        queue_id,
        SCHEDULE_NAME,
        SCHEDULE_CRON,
        SCHEDULE_HANDLER,
        {"report": "throughput", "window_hours": 1},
        next_minute,
        owner_id,
    )
    return schedule_id


async def _insert_job(
    conn: asyncpg.Connection[Any],
    job: DemoJob,
    *,
    queue_id: uuid.UUID,
    policy_id: uuid.UUID,
    max_attempts: int,
    worker_id: uuid.UUID,
    schedule_id: uuid.UUID | None,
) -> int:
    charged = len(job.attempts)
    last = job.attempts[-1] if job.attempts else None
    job_id: int = await conn.fetchval(
        """INSERT INTO jobs (queue_id, handler, payload, status, priority, run_at, attempt,
                             max_attempts, retry_policy_id, schedule_id, claimed_at, started_at,
                             execution_seq, result, last_error, progress, created_at, updated_at,
                             finished_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7::integer, $8, $9, $10, $11, $12, $7::integer, $13, $14, $15, $16,
                   coalesce($17::timestamptz, $16::timestamptz), $17)
           RETURNING id""",
        queue_id,
        job.handler,
        job.payload,
        job.status,
        job.priority,
        job.run_at,
        charged,
        max_attempts,
        policy_id,
        schedule_id if job.from_schedule else None,
        last.started_at if last else None,
        last.started_at if last else None,
        job.result,
        job.last_error,
        100 if job.status == "completed" else None,
        job.created_at,
        job.finished_at,
    )
    await conn.executemany(
        """INSERT INTO job_executions (job_id, queue_id, execution_seq, attempt, worker_id, status,
                                       claimed_at, started_at, finished_at, error)
           VALUES ($1, $2, $3, $3, $4, $5, $6, $6, $7, $8)""",
        [
            (job_id, queue_id, seq, worker_id, a.status, a.started_at, a.finished_at, a.error)
            for seq, a in enumerate(job.attempts, start=1)
        ],
    )
    log_seq = max(charged, 1)
    await conn.executemany(
        """INSERT INTO job_logs (job_id, execution_seq, level, message, created_at)
           VALUES ($1, $2, $3, $4, $5)""",
        [
            (job_id, min(n, log_seq), level, message, job.finished_at or job.created_at)
            for n, (level, message) in enumerate(job.logs, start=1)
        ],
    )
    if job.status == "dead_letter":
        assert job.dead_letter_reason is not None
        assert last is not None
        await conn.execute(
            """INSERT INTO dead_letter_jobs (job_id, queue_id, handler, payload, error, attempts,
                                             failed_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7)""",
            job_id,
            queue_id,
            job.handler,
            job.payload,
            job.dead_letter_reason,
            charged,
            last.finished_at,
        )
    return job_id


async def seed_demo(conn: asyncpg.Connection[Any]) -> None:
    """Insert the demo data into a migrated, empty database, in one transaction."""
    async with conn.transaction():
        now: datetime = await conn.fetchval("SELECT now()")
        org_id, project_id = await _insert_tenancy(conn)
        owner_id = await conn.fetchval("SELECT id FROM users WHERE email = $1", OPERATOR_EMAIL)
        policy_ids, queue_ids = await _insert_queues(conn, project_id)
        worker_id = await _insert_worker(conn, now, queue_ids)
        schedule_id = await _insert_schedule(conn, now, queue_ids[SCHEDULE_QUEUE], owner_id)
        last_scheduled: tuple[datetime, int] | None = None
        demo_jobs = build_demo_jobs(now)
        for job in demo_jobs:
            policy = _policy_for(job.queue)
            job_id = await _insert_job(
                conn,
                job,
                queue_id=queue_ids[job.queue],
                policy_id=policy_ids[policy.name],
                max_attempts=policy.max_attempts,
                worker_id=worker_id,
                schedule_id=schedule_id,
            )
            if job.from_schedule and (last_scheduled is None or job.created_at > last_scheduled[0]):
                last_scheduled = (job.created_at, job_id)
        if last_scheduled is not None:
            await conn.execute(
                "UPDATE scheduled_jobs SET last_run_at = $2, last_job_id = $3 WHERE id = $1",
                schedule_id,
                *last_scheduled,
            )
        await conn.execute(
            """INSERT INTO audit_events (org_id, project_id, actor_user_id, action, target_type,
                                         target_id, details)
               VALUES ($1, $2, NULL, 'demo.seeded', 'project', $3, $4)""",
            org_id,
            project_id,
            str(project_id),
            {"queues": sorted(queue_ids), "jobs": len(demo_jobs)},
        )


async def table_counts(conn: asyncpg.Connection[Any]) -> dict[str, int]:
    """Rows per table in the public schema (alembic's bookkeeping excluded), by name."""
    names = await conn.fetch(
        """SELECT tablename FROM pg_tables
           WHERE schemaname = 'public' AND tablename <> 'alembic_version' ORDER BY tablename"""
    )
    counts: dict[str, int] = {}
    for row in names:
        name = row["tablename"]
        counts[name] = await conn.fetchval(f'SELECT count(*) FROM "{name}"')
    return counts
