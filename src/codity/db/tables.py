"""The whole schema as SQLAlchemy Core tables. Alembic migrations are written from this file.

Conventions: ownership cascades down (organization -> project -> queue -> job -> executions);
references that are history rather than ownership (a worker, an author) are SET NULL so that
deleting them never deletes what happened. `docs/DATABASE.md` explains each decision.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Enum,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, DOMAIN, INET, JSONB, UUID

from codity.domain.limits import MAX_PAYLOAD_BYTES
from codity.domain.states import (
    BackoffStrategy,
    ExecutionStatus,
    JobStatus,
    MemberRole,
    WorkerStatus,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _enum(py_enum: type, name: str) -> Enum:
    return Enum(py_enum, name=name, values_callable=lambda e: [m.value for m in e])


job_status = _enum(JobStatus, "job_status")
member_role = _enum(MemberRole, "member_role")
backoff_strategy = _enum(BackoffStrategy, "backoff_strategy")
worker_status = _enum(WorkerStatus, "worker_status")
execution_status = _enum(ExecutionStatus, "execution_status")


def _uuid_pk() -> Column[object]:
    return Column("id", UUID(as_uuid=True), primary_key=True, server_default=func.gen_random_uuid())


def _created_at() -> Column[object]:
    return Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now())


organizations = Table(
    "organizations",
    metadata,
    _uuid_pk(),
    Column("name", Text, nullable=False),
    Column("slug", Text, nullable=False, unique=True),
    _created_at(),
)

users = Table(
    "users",
    metadata,
    _uuid_pk(),
    Column("email", Text, nullable=False),
    Column("password_hash", Text, nullable=False),
    Column("display_name", Text, nullable=True),
    Column("is_active", Boolean, nullable=False, server_default=text("true")),
    _created_at(),
    Column("last_login_at", DateTime(timezone=True), nullable=True),
    # Set when the person opened the signed verification link sent to `email`; until then the
    # account can neither sign in nor join an organisation.
    Column("email_verified_at", DateTime(timezone=True), nullable=True),
    # Access tokens issued before this instant are refused (password change, "sign out
    # everywhere"); checked on every request with the membership.
    Column("sessions_valid_after", DateTime(timezone=True), nullable=True),
    CheckConstraint("email = lower(email)", name="email_lowercase"),
    UniqueConstraint("email"),
)

# One row per verification link sent: the link is a signed token naming `id`; using it sets
# `used_at`, so a link works once, and only before `expires_at`.
email_verifications = Table(
    "email_verifications",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column(
        "user_id", UUID(as_uuid=True), ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    ),
    Column("email", Text, nullable=False),
    _created_at(),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True), nullable=True),
    Index("ix_email_verifications_user_id", "user_id"),
)

memberships = Table(
    "memberships",
    metadata,
    Column(
        "org_id",
        UUID(as_uuid=True),
        ForeignKey("organizations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column(
        "user_id", UUID(as_uuid=True), ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    ),
    Column("role", member_role, nullable=False),
    _created_at(),
    PrimaryKeyConstraint("org_id", "user_id"),
    Index("ix_memberships_user_id", "user_id"),
)

invitations = Table(
    "invitations",
    metadata,
    _uuid_pk(),
    Column(
        "org_id",
        UUID(as_uuid=True),
        ForeignKey("organizations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("email", Text, nullable=False),
    Column("role", member_role, nullable=False),
    Column(
        "invited_by", UUID(as_uuid=True), ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    ),
    _created_at(),
    Column("accepted_at", DateTime(timezone=True), nullable=True),
    # The invitation is a single-use token (only its SHA-256 here) that expires; the signed-in,
    # verified invitee accepts it explicitly. Inviting the same email again replaces it.
    Column("token_hash", LargeBinary, nullable=True, unique=True),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column(
        "accepted_by",
        UUID(as_uuid=True),
        ForeignKey("users.id", ondelete="SET NULL"),
        nullable=True,
    ),
    UniqueConstraint("org_id", "email"),
)

projects = Table(
    "projects",
    metadata,
    _uuid_pk(),
    Column(
        "org_id",
        UUID(as_uuid=True),
        ForeignKey("organizations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("name", Text, nullable=False),
    Column("slug", Text, nullable=False),
    _created_at(),
    # Fair shares: workers serving several projects' queues share their claims between the
    # projects with work in proportion to this (docs/CONCURRENCY.md, "Fair shares"). Org admins set it.
    Column("weight", Integer, nullable=False, server_default=text("1")),
    # Hosts this project's http_request jobs may reach although they resolve to internal
    # addresses; only those the deployment allows too (HTTP_HANDLER_ALLOWLIST) count.
    Column("http_allowlist", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
    UniqueConstraint("org_id", "slug"),
    CheckConstraint("weight BETWEEN 1 AND 1000", name="weight_range"),
)

api_keys = Table(
    "api_keys",
    metadata,
    _uuid_pk(),
    Column(
        "project_id",
        UUID(as_uuid=True),
        ForeignKey("projects.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("name", Text, nullable=False),
    Column("prefix", Text, nullable=False),  # first characters, shown in lists to tell keys apart
    Column("key_hash", LargeBinary, nullable=False, unique=True),  # SHA-256 of the secret
    Column("role", member_role, nullable=False),
    Column(
        "created_by", UUID(as_uuid=True), ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    ),
    _created_at(),
    Column("last_used_at", DateTime(timezone=True), nullable=True),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("expires_at", DateTime(timezone=True), nullable=False),  # every key expires (0019)
    CheckConstraint("octet_length(key_hash) = 32", name="sha256_length"),
    Index("ix_api_keys_project_id", "project_id"),
)

refresh_tokens = Table(
    "refresh_tokens",
    metadata,
    _uuid_pk(),
    Column(
        "user_id", UUID(as_uuid=True), ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    ),
    Column("family_id", UUID(as_uuid=True), nullable=False),
    Column("token_hash", LargeBinary, nullable=False, unique=True),
    Column("issued_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column(
        "rotated_at", DateTime(timezone=True), nullable=True
    ),  # set when exchanged for a new one
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("user_agent", Text, nullable=True),
    Column("ip", INET, nullable=True),
    Index("ix_refresh_tokens_family_id", "family_id"),
    Index("ix_refresh_tokens_user_id", "user_id"),
)

retry_policies = Table(
    "retry_policies",
    metadata,
    _uuid_pk(),
    Column(
        "project_id",
        UUID(as_uuid=True),
        ForeignKey("projects.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("name", Text, nullable=False),
    Column("strategy", backoff_strategy, nullable=False),
    Column("base_delay_ms", Integer, nullable=False),
    Column("max_delay_ms", Integer, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("jitter", Boolean, nullable=False, server_default=text("true")),
    _created_at(),
    UniqueConstraint("project_id", "name"),
    CheckConstraint("base_delay_ms >= 0 AND max_delay_ms >= base_delay_ms", name="delays"),
    CheckConstraint("max_attempts BETWEEN 1 AND 100", name="max_attempts_range"),
)

queues = Table(
    "queues",
    metadata,
    _uuid_pk(),
    Column(
        "project_id",
        UUID(as_uuid=True),
        ForeignKey("projects.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("name", Text, nullable=False),
    Column("description", Text, nullable=True),
    Column("priority", SmallInteger, nullable=False, server_default=text("0")),
    Column(
        "concurrency_limit", Integer, nullable=True
    ),  # max running across all workers; NULL = no limit
    Column("is_paused", Boolean, nullable=False, server_default=text("false")),
    Column(
        "retry_policy_id",
        UUID(as_uuid=True),
        ForeignKey("retry_policies.id", ondelete="SET NULL"),
        nullable=True,
    ),
    Column("default_max_attempts", Integer, nullable=False, server_default=text("3")),
    Column("default_timeout_ms", Integer, nullable=True),
    Column(
        "rate_limit_per_minute", Integer, nullable=True
    ),  # enqueue ceiling for this queue (the API's); NULL = project default
    # Set while the queue drains: it takes no new jobs, workers finish the ones it has, and the
    # scheduler pauses it (clearing this) once none is left unfinished.
    Column("draining_since", DateTime(timezone=True), nullable=True),
    # Flow control, enforced by the claim (docs/CONCURRENCY.md): at most this many jobs with the
    # same jobs.concurrency_key claimed or running at once; NULL = no per-key limit.
    Column("key_concurrency_limit", Integer, nullable=True),
    # Start at most rate_limit_count jobs in any window of rate_limit_period_ms (across all
    # workers); per concurrency key when rate_limit_per_key. NULL = no rate limit.
    Column("rate_limit_count", Integer, nullable=True),
    Column("rate_limit_period_ms", Integer, nullable=True),
    Column("rate_limit_per_key", Boolean, nullable=False, server_default=text("false")),
    _created_at(),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("project_id", "name"),
    CheckConstraint(
        "concurrency_limit IS NULL OR concurrency_limit > 0", name="concurrency_limit_positive"
    ),
    CheckConstraint("default_max_attempts BETWEEN 1 AND 100", name="default_max_attempts_range"),
    CheckConstraint(
        "default_timeout_ms IS NULL OR default_timeout_ms > 0", name="default_timeout_positive"
    ),
    CheckConstraint("name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'", name="name_format"),
    CheckConstraint(
        "key_concurrency_limit IS NULL OR key_concurrency_limit > 0",
        name="key_concurrency_limit_positive",
    ),
    CheckConstraint(
        "(rate_limit_count IS NULL) = (rate_limit_period_ms IS NULL)"
        " AND (rate_limit_count IS NULL OR (rate_limit_count > 0 AND rate_limit_period_ms > 0))",
        name="rate_limit_shape",
    ),
    # rate_limit_per_key splits a rate limit between keys: without one it means nothing (0016).
    CheckConstraint(
        "rate_limit_count IS NOT NULL OR NOT rate_limit_per_key",
        name="rate_limit_per_key_needs_a_limit",
    ),
)

workers = Table(
    "workers",
    metadata,
    _uuid_pk(),
    Column("hostname", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("version", Text, nullable=False),
    Column("capacity", Integer, nullable=False),
    Column("queue_names", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("status", worker_status, nullable=False, server_default=text("'active'")),
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # Denormalised on purpose: the sweep reads it every tick; MAX() over history would not scale.
    Column("last_heartbeat_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column(
        "stopped_at", DateTime(timezone=True), nullable=True
    ),  # set on stop or death: freezes uptime
    Column("in_flight", Integer, nullable=False, server_default=text("0")),
    # Sync handlers whose attempt ended (timed out, cancelled) while their thread runs on:
    # Python cannot stop a thread; each holds a slot until it returns. Set by the heartbeat.
    Column("lingering_threads", Integer, nullable=False, server_default=text("0")),
    # The handler names this worker runs (jobs explain: handler_not_registered).
    Column("handlers", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    # What it holds per queue as of its last fair claim (aligned arrays), written by
    # codity_fair_shares for the other workers' shares (docs/CONCURRENCY.md, "Fair shares").
    Column(
        "load_queue_ids", ARRAY(UUID(as_uuid=True)), nullable=False, server_default=text("'{}'")
    ),
    Column("load_counts", ARRAY(Integer), nullable=False, server_default=text("'{}'")),
    Index(
        "ix_workers_alive_heartbeat",
        "last_heartbeat_at",
        postgresql_where=text("status IN ('active', 'draining')"),
    ),
)

# Which queues a worker serves: lets the API show each tenant only the workers on its queues.
worker_queues = Table(
    "worker_queues",
    metadata,
    Column(
        "worker_id",
        UUID(as_uuid=True),
        ForeignKey("workers.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column(
        "queue_id", UUID(as_uuid=True), ForeignKey("queues.id", ondelete="CASCADE"), nullable=False
    ),
    PrimaryKeyConstraint("worker_id", "queue_id"),
    Index("ix_worker_queues_queue_id", "queue_id"),
)

# Compact heartbeat history: one row per worker per minute, upserted, instead of a row per beat.
worker_heartbeats = Table(
    "worker_heartbeats",
    metadata,
    Column(
        "worker_id",
        UUID(as_uuid=True),
        ForeignKey("workers.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("minute", DateTime(timezone=True), nullable=False),
    Column("beats", Integer, nullable=False, server_default=text("1")),
    Column("max_in_flight", Integer, nullable=False, server_default=text("0")),
    PrimaryKeyConstraint("worker_id", "minute"),
)

scheduled_jobs = Table(
    "scheduled_jobs",
    metadata,
    _uuid_pk(),
    Column(
        "queue_id", UUID(as_uuid=True), ForeignKey("queues.id", ondelete="CASCADE"), nullable=False
    ),
    Column("name", Text, nullable=False),
    Column("cron_expression", Text, nullable=False),
    Column("timezone", Text, nullable=False, server_default=text("'UTC'")),
    Column("handler", Text, nullable=False),
    Column("payload", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("priority", SmallInteger, nullable=False, server_default=text("0")),
    Column("enabled", Boolean, nullable=False, server_default=text("true")),
    Column("next_run_at", DateTime(timezone=True), nullable=False),
    Column("last_run_at", DateTime(timezone=True), nullable=True),
    Column(
        "last_job_id",
        BigInteger,
        ForeignKey("jobs.id", ondelete="SET NULL", use_alter=True),
        nullable=True,
    ),
    Column(
        "created_by", UUID(as_uuid=True), ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    ),
    _created_at(),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("queue_id", "name"),
    CheckConstraint(f"octet_length(payload::text) <= {MAX_PAYLOAD_BYTES}", name="payload_size"),
    Index("ix_scheduled_jobs_due", "next_run_at", postgresql_where=text("enabled")),
)


# The single-column checks of `jobs` are domains (migration 0033): a domain's check runs only
# when a statement writes the column, where a table CHECK runs on every UPDATE of a row (a claim
# or a completion re-printed the whole payload as JSON text to measure it) and is planned again
# for every statement. The constraint names are those of the table CHECKs they replaced.
def _jobs_domain(column: str, data_type: Any, name: str, check: str) -> DOMAIN:
    return DOMAIN(f"jobs_{column}", data_type, constraint_name=f"ck_jobs_{name}", check=text(check))


JOBS_PAYLOAD = _jobs_domain(
    "payload", JSONB, "payload_size", f"octet_length(VALUE::text) <= {MAX_PAYLOAD_BYTES}"
)
JOBS_MAX_ATTEMPTS = _jobs_domain(
    "max_attempts", Integer, "max_attempts_range", "VALUE BETWEEN 1 AND 100"
)
JOBS_EXECUTION_SEQ = _jobs_domain(
    "execution_seq", Integer, "execution_seq_nonnegative", "VALUE >= 0"
)
JOBS_TIMEOUT_MS = _jobs_domain("timeout_ms", Integer, "timeout_positive", "VALUE > 0")
JOBS_PROGRESS = _jobs_domain("progress", SmallInteger, "progress_range", "VALUE BETWEEN 0 AND 100")
JOBS_PENDING_DEPENDENCIES = _jobs_domain(
    "pending_dependencies", Integer, "pending_dependencies_nonnegative", "VALUE >= 0"
)
JOBS_TRACE_PARENT = _jobs_domain(
    "trace_parent", Text, "trace_parent_length", "octet_length(VALUE) <= 128"
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    # queue_id, retry_policy_id and schedule_id have no foreign keys (migration 0036): triggers
    # check them once per statement with the keys' row lock, and do what CASCADE (a deleted
    # queue's jobs) and SET NULL (a deleted policy or schedule) did.
    Column("queue_id", UUID(as_uuid=True), nullable=False),
    Column("handler", Text, nullable=False),
    Column("payload", JOBS_PAYLOAD, nullable=False, server_default=text("'{}'::jsonb")),
    Column("status", job_status, nullable=False),
    Column("priority", SmallInteger, nullable=False, server_default=text("0")),
    Column("run_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("attempt", Integer, nullable=False, server_default=text("0")),
    Column("max_attempts", JOBS_MAX_ATTEMPTS, nullable=False),
    Column("retry_policy_id", UUID(as_uuid=True), nullable=True),
    Column("timeout_ms", JOBS_TIMEOUT_MS, nullable=True),
    Column("idempotency_key", Text, nullable=True),
    # Flow control: jobs sharing a key share the queue's key_concurrency_limit (and, with
    # rate_limit_per_key, a rate limit of their own).
    Column("concurrency_key", Text, nullable=True),
    # Unique jobs: an enqueue with unique_for_s returns a recent matching job with this key
    # instead of making a new one (core/enqueue.py). NULL for jobs enqueued without it.
    Column("unique_key", Text, nullable=True),
    Column("batch_id", UUID(as_uuid=True), nullable=True),
    Column("schedule_id", UUID(as_uuid=True), nullable=True),
    Column(
        "pending_dependencies", JOBS_PENDING_DEPENDENCIES, nullable=False, server_default=text("0")
    ),
    # No foreign key (migration 0015): the claim checks its worker once per statement
    # (codity_require_worker) and a trigger forgets a deleted worker (what SET NULL did).
    Column("worker_id", UUID(as_uuid=True), nullable=True),
    Column("claimed_at", DateTime(timezone=True), nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("lock_expires_at", DateTime(timezone=True), nullable=True),
    # Monotonic identity of the current/last attempt; `attempt` is accounting and may repeat.
    Column("execution_seq", JOBS_EXECUTION_SEQ, nullable=False, server_default=text("0")),
    Column("cancel_requested_at", DateTime(timezone=True), nullable=True),
    Column("result", JSONB, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("progress", JOBS_PROGRESS, nullable=True),
    Column("progress_message", Text, nullable=True),
    _created_at(),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    # W3C traceparent of the enqueuing code when it was traced (codity[otel]); the worker's span
    # for each attempt links to it.
    Column("trace_parent", JOBS_TRACE_PARENT, nullable=True),
    CheckConstraint("attempt >= 0 AND attempt <= max_attempts", name="attempt_range"),
    CheckConstraint(
        "status NOT IN ('claimed', 'running') OR (worker_id IS NOT NULL AND lock_expires_at IS NOT NULL)",
        name="leased_has_owner",
    ),
    # The claim index: columns match the claim's ORDER BY term for term, so no Sort node.
    Index(
        "idx_jobs_claim",
        "queue_id",
        text("priority DESC"),
        "run_at",
        "id",
        postgresql_where=text("status = 'queued'"),
    ),
    Index("idx_jobs_scheduled_due", "run_at", postgresql_where=text("status = 'scheduled'")),
    # Every leased job (as many as the fleet's capacity): the heartbeat, the dead-worker sweep
    # and the reaper. `lock_expires_at` is in no index, so a heartbeat's extension of a lease
    # is a HOT update (migration 0034).
    Index(
        "idx_jobs_worker_leased",
        "worker_id",
        postgresql_where=text("status IN ('claimed', 'running')"),
    ),
    Index("idx_jobs_queue_status_id", "queue_id", "status", text("id DESC")),
    # Idempotent enqueue (ON CONFLICT). Partial: jobs without a key never enter it, so neither
    # their insert nor any later update writes it.
    Index(
        "uq_jobs_queue_id_idempotency_key",
        "queue_id",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
    Index("idx_jobs_batch", "batch_id", postgresql_where=text("batch_id IS NOT NULL")),
    Index("idx_jobs_finished", "finished_at", postgresql_where=text("finished_at IS NOT NULL")),
    # The dashboard's payload search (`payload @> {...}`): jsonb_path_ops keeps one hash per
    # path-and-value, the smallest GIN shape that answers containment. Leased jobs are left out
    # (migration 0035): a claim and a running mark then write no entry in it; the search reads
    # them through idx_jobs_worker_leased (api_jobs.sql).
    Index(
        "idx_jobs_payload",
        "payload",
        postgresql_using="gin",
        postgresql_ops={"payload": "jsonb_path_ops"},
        postgresql_where=text("status NOT IN ('claimed', 'running')"),
    ),
    # The dashboard's error-text search: words of the last error, only for jobs that have one.
    Index(
        "idx_jobs_error_text",
        text("to_tsvector('simple'::regconfig, last_error)"),
        postgresql_using="gin",
        postgresql_where=text("last_error IS NOT NULL"),
    ),
    # Unique jobs: the newest job of a queue with a given unique key. Partial: plain jobs never
    # enter it, so neither their insert nor any later update writes it.
    Index(
        "idx_jobs_unique",
        "queue_id",
        "unique_key",
        text("created_at DESC"),
        postgresql_where=text("unique_key IS NOT NULL"),
    ),
    # Key limits: a key's leased jobs, counted by the claim with one probe per key (0020).
    # Partial: jobs without a key, and queued or finished ones, never enter it.
    Index(
        "idx_jobs_key_leased",
        "queue_id",
        "concurrency_key",
        postgresql_where=text("status IN ('claimed', 'running') AND concurrency_key IS NOT NULL"),
    ),
    # Hot table: leave room on each page for HOT updates as a job moves through its states.
    postgresql_with={
        "fillfactor": "80",
        "autovacuum_vacuum_scale_factor": "0.02",
        "autovacuum_analyze_scale_factor": "0.02",
    },
)

job_dependencies = Table(
    "job_dependencies",
    metadata,
    Column("job_id", BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("depends_on_id", BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    PrimaryKeyConstraint("job_id", "depends_on_id"),
    CheckConstraint("job_id <> depends_on_id", name="not_self"),
    Index("ix_job_dependencies_depends_on_id", "depends_on_id"),
)

job_executions = Table(
    "job_executions",
    metadata,
    # No foreign keys (migration 0015): every execution row is made from the job row its own
    # statement just updated, so a per-row check could never fail; a statement-level trigger on
    # jobs deletes a deleted job's executions (what CASCADE did; a deleted queue deletes its
    # jobs), one on workers forgets a deleted worker (what SET NULL did).
    Column("job_id", BigInteger, nullable=False),
    # Denormalised from jobs so per-queue throughput needs no join over history.
    Column("queue_id", UUID(as_uuid=True), nullable=False),
    Column("execution_seq", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("worker_id", UUID(as_uuid=True), nullable=True),
    Column("status", execution_status, nullable=False),
    Column("claimed_at", DateTime(timezone=True), nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("finished_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("error", Text, nullable=True),
    Column("traceback", Text, nullable=True),
    # The attempt's identity (execution_seq never repeats for a job): no surrogate id beside it
    # (migration 0017).
    PrimaryKeyConstraint("job_id", "execution_seq"),
    Index("ix_job_executions_queue_finished", "queue_id", "finished_at"),
    Index("ix_job_executions_worker_id", "worker_id"),
)

job_logs = Table(
    "job_logs",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column("job_id", BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("execution_seq", Integer, nullable=False),
    Column("level", Text, nullable=False),
    Column("message", Text, nullable=False),
    Column("fields", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    _created_at(),
    CheckConstraint("octet_length(message) <= 4096", name="message_size"),
    Index("ix_job_logs_job_id", "job_id", "id"),
    Index("ix_job_logs_created_at", "created_at"),
)

dead_letter_jobs = Table(
    "dead_letter_jobs",
    metadata,
    _uuid_pk(),
    # SET NULL: the dead letter keeps its own copy and survives the original being purged.
    Column("job_id", BigInteger, ForeignKey("jobs.id", ondelete="SET NULL"), nullable=True),
    Column(
        "queue_id", UUID(as_uuid=True), ForeignKey("queues.id", ondelete="CASCADE"), nullable=False
    ),
    Column("handler", Text, nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("error", Text, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("failed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("replayed_at", DateTime(timezone=True), nullable=True),
    Column("replay_count", Integer, nullable=False, server_default=text("0")),
    CheckConstraint(f"octet_length(payload::text) <= {MAX_PAYLOAD_BYTES}", name="payload_size"),
    Index(
        "ix_dead_letter_jobs_queue_pending",
        "queue_id",
        text("failed_at DESC"),
        postgresql_where=text("replayed_at IS NULL"),
    ),
    Index("ix_dead_letter_jobs_job_id", "job_id"),
)

audit_events = Table(
    "audit_events",
    metadata,
    Column("id", BigInteger, Identity(always=False), primary_key=True),
    Column(
        "org_id",
        UUID(as_uuid=True),
        ForeignKey("organizations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column(
        "project_id",
        UUID(as_uuid=True),
        ForeignKey("projects.id", ondelete="SET NULL"),
        nullable=True,
    ),
    Column(
        "actor_user_id",
        UUID(as_uuid=True),
        ForeignKey("users.id", ondelete="SET NULL"),
        nullable=True,
    ),
    Column(
        "actor_api_key_id",
        UUID(as_uuid=True),
        ForeignKey("api_keys.id", ondelete="SET NULL"),
        nullable=True,
    ),
    Column("action", Text, nullable=False),
    Column("target_type", Text, nullable=True),
    Column("target_id", Text, nullable=True),
    Column("details", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("request_id", Text, nullable=True),
    Column("ip", INET, nullable=True),
    _created_at(),
    Index("ix_audit_events_org_created", "org_id", text("created_at DESC")),
)

# Claim rate limits (queues.rate_limit_*): the starts of the last period, per queue ('' key) or
# per concurrency key, as counts in RATE_SLOTS + 1 slots of period/RATE_SLOTS each; counts[1]
# is slot `slot` (the newest), counts[i] slot `slot - i + 1`. Written by the claim only, while
# it holds the queue row's lock (docs/CONCURRENCY.md, "Rate limits").
queue_rate_windows = Table(
    "queue_rate_windows",
    metadata,
    Column(
        "queue_id", UUID(as_uuid=True), ForeignKey("queues.id", ondelete="CASCADE"), nullable=False
    ),
    Column("key", Text, nullable=False),  # '' = the queue's own window (or jobs with no key)
    Column("slot", BigInteger, nullable=False),
    Column("counts", ARRAY(Integer), nullable=False),
    PrimaryKeyConstraint("queue_id", "key"),
)

# Fixed-window counters for rate limits, kept in PostgreSQL (no Redis).
rate_limit_buckets = Table(
    "rate_limit_buckets",
    metadata,
    Column("key", Text, primary_key=True),
    Column("window_start", DateTime(timezone=True), nullable=False),
    Column("count", Integer, nullable=False, server_default=text("0")),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index("ix_rate_limit_buckets_expires_at", "expires_at"),
)


# Failed sign-ins per account: each failure past the free ones makes the next attempt wait
# longer (progressive delay) instead of locking the account, so nobody can lock anyone out.
login_throttles = Table(
    "login_throttles",
    metadata,
    Column("account", Text, primary_key=True),
    Column("failures", Integer, nullable=False, server_default=text("0")),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_login_throttles_updated_at", "updated_at"),
)


# --- Chart rollups: written by the scheduler's stats loop, read by the dashboard's charts --------
# Each row covers one bucket of `grain` minutes (1 = a minute, 15 = a quarter, 60 = an hour) starting at `bucket`.
# Durations are histograms (codity.domain.histogram: log-spaced slots, summable), so a 24 h or
# 7 d chart adds rows instead of rescanning jobs or executions on every page view.

_GRAIN_CHECK = "grain IN (1, 15, 60)"


def _grain_columns() -> list[Column[object]]:
    return [
        Column("grain", SmallInteger, nullable=False),
        Column("bucket", DateTime(timezone=True), nullable=False),
    ]


queue_stats = Table(
    "queue_stats",
    metadata,
    Column(
        "queue_id", UUID(as_uuid=True), ForeignKey("queues.id", ondelete="CASCADE"), nullable=False
    ),
    *_grain_columns(),
    # Sampled when the bucket is rolled up (NULL for buckets rolled up late, after an outage).
    Column("depth", Integer, nullable=True),  # waiting + scheduled + queued
    Column("running", Integer, nullable=True),  # claimed + running
    Column("completed", Integer, nullable=False, server_default=text("0")),
    Column("failed", Integer, nullable=False, server_default=text("0")),  # failed + timed out
    Column("wait_hist", ARRAY(Integer), nullable=False),  # run_at -> handler start, per attempt
    PrimaryKeyConstraint("queue_id", "grain", "bucket"),
    CheckConstraint(_GRAIN_CHECK, name="grain"),
)

handler_stats = Table(
    "handler_stats",
    metadata,
    Column(
        "queue_id", UUID(as_uuid=True), ForeignKey("queues.id", ondelete="CASCADE"), nullable=False
    ),
    Column("handler", Text, nullable=False),
    *_grain_columns(),
    Column("completed", Integer, nullable=False, server_default=text("0")),
    Column("failed", Integer, nullable=False, server_default=text("0")),
    Column("run_hist", ARRAY(Integer), nullable=False),  # handler start -> finish, per attempt
    PrimaryKeyConstraint("queue_id", "grain", "bucket", "handler"),
    CheckConstraint(_GRAIN_CHECK, name="grain"),
)

# Per worker AND queue, so a tenant's chart counts only its own queues' jobs on a shared worker.
worker_stats = Table(
    "worker_stats",
    metadata,
    Column(
        "queue_id", UUID(as_uuid=True), ForeignKey("queues.id", ondelete="CASCADE"), nullable=False
    ),
    Column(
        "worker_id",
        UUID(as_uuid=True),
        ForeignKey("workers.id", ondelete="CASCADE"),
        nullable=False,
    ),
    *_grain_columns(),
    Column("completed", Integer, nullable=False, server_default=text("0")),
    Column("failed", Integer, nullable=False, server_default=text("0")),
    Column("in_flight", Integer, nullable=True),  # sampled, like queue_stats.depth
    PrimaryKeyConstraint("queue_id", "grain", "bucket", "worker_id"),
    CheckConstraint(_GRAIN_CHECK, name="grain"),
)

# The rollup's watermark: every minute before `done_until` is rolled up. One row per rollup;
# replicas lock it with SKIP LOCKED, so one scheduler rolls up a given minute.
stats_rollup_state = Table(
    "stats_rollup_state",
    metadata,
    Column("name", Text, primary_key=True),
    Column("done_until", DateTime(timezone=True), nullable=False),
)

# Bulk actions (the dashboard's "retry/cancel/delete every job this filter matches"): the filter
# frozen at creation (with `high_water_id`/`frozen_at` so later rows are never swept in), the
# keyset position reached (`position`) and the counts, written by the same transaction as each
# chunk's changes, so a resumed run never acts twice (codity.api.bulk_runner, docs/DASHBOARD.md).
bulk_actions = Table(
    "bulk_actions",
    metadata,
    _uuid_pk(),
    Column(
        "project_id",
        UUID(as_uuid=True),
        ForeignKey("projects.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("target", Text, nullable=False),  # 'jobs' | 'dead_letters'
    Column("action", Text, nullable=False),
    Column("status", Text, nullable=False, server_default=text("'pending'")),
    Column("filter", JSONB, nullable=True),  # the filter as the caller gave it (NULL with ids)
    Column("ids", JSONB, nullable=True),  # the ids the caller listed (NULL with a filter)
    Column("queue_id", UUID(as_uuid=True), nullable=True),  # the filter's queue, resolved
    Column("high_water_id", BigInteger, nullable=True),  # jobs: no job above this id is touched
    Column("frozen_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("position", JSONB, nullable=True),  # the keyset position after the last chunk
    Column("matched", Integer, nullable=False, server_default=text("0")),
    Column("processed", Integer, nullable=False, server_default=text("0")),
    Column("skipped", Integer, nullable=False, server_default=text("0")),
    Column("chunks", Integer, nullable=False, server_default=text("0")),
    Column("error", Text, nullable=True),
    Column(
        "created_by", UUID(as_uuid=True), ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    ),
    Column(
        "created_by_api_key",
        UUID(as_uuid=True),
        ForeignKey("api_keys.id", ondelete="SET NULL"),
        nullable=True,
    ),
    Column("request_id", Text, nullable=True),
    Column("owner", Text, nullable=True),  # the API process running it
    Column("heartbeat_at", DateTime(timezone=True), nullable=True),
    _created_at(),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("target IN ('jobs', 'dead_letters')", name="target"),
    CheckConstraint(
        "(target = 'jobs' AND action IN ('retry', 'cancel', 'delete'))"
        " OR (target = 'dead_letters' AND action IN ('replay', 'discard'))",
        name="action",
    ),
    CheckConstraint(
        "status IN ('pending', 'running', 'completed', 'stopped', 'failed')", name="status"
    ),
    CheckConstraint("(filter IS NULL) <> (ids IS NULL)", name="filter_or_ids"),
    Index("ix_bulk_actions_project_id_created_at", "project_id", text("created_at DESC")),
    Index(
        "ix_bulk_actions_open",
        "created_at",
        postgresql_where=text("status IN ('pending', 'running')"),
    ),
)
