"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-12-02 14:01:32.071255
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ENUMS = ("job_status", "member_role", "backoff_strategy", "worker_status", "execution_status")

# The job lifecycle's allowed-map (codity.domain.states.ALLOWED_TRANSITIONS), enforced in the
# database too so that no hand-written UPDATE can move a job along an edge the map lacks.
# A test checks that this function and the Python map agree edge for edge.
LIFECYCLE_FUNCTION = """
CREATE FUNCTION codity_check_job_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT (
    CASE OLD.status
      WHEN 'waiting' THEN NEW.status IN ('queued', 'scheduled', 'cancelled')
      WHEN 'scheduled' THEN NEW.status IN ('queued', 'cancelled')
      WHEN 'queued' THEN NEW.status IN ('claimed', 'scheduled', 'cancelled')
      WHEN 'claimed' THEN NEW.status IN ('running', 'queued', 'completed', 'failed', 'scheduled', 'dead_letter', 'cancelled')
      WHEN 'running' THEN NEW.status IN ('completed', 'failed', 'queued', 'scheduled', 'dead_letter', 'cancelled')
      WHEN 'failed' THEN NEW.status IN ('scheduled', 'queued', 'dead_letter')
      WHEN 'dead_letter' THEN NEW.status IN ('queued')
      WHEN 'cancelled' THEN NEW.status IN ('queued')
      ELSE false
    END
  ) THEN
    RAISE EXCEPTION 'illegal job transition % -> % (job %)', OLD.status, NEW.status, OLD.id
      USING ERRCODE = 'check_violation', CONSTRAINT = 'jobs_lifecycle';
  END IF;
  RETURN NEW;
END
$$
"""
LIFECYCLE_TRIGGER = """
CREATE TRIGGER jobs_lifecycle BEFORE UPDATE OF status ON jobs
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
  EXECUTE FUNCTION codity_check_job_transition()
"""


def upgrade() -> None:
    op.create_table(
        "organizations",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("slug", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organizations")),
        sa.UniqueConstraint("slug", name=op.f("uq_organizations_slug")),
    )
    op.create_table(
        "rate_limit_buckets",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_rate_limit_buckets")),
    )
    op.create_index(
        "ix_rate_limit_buckets_expires_at", "rate_limit_buckets", ["expires_at"], unique=False
    )
    op.create_table(
        "users",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("display_name", sa.Text(), nullable=True),
        sa.Column("is_active", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("last_login_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("email = lower(email)", name=op.f("ck_users_email_lowercase")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("hostname", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sa.Text(), nullable=False),
        sa.Column("capacity", sa.Integer(), nullable=False),
        sa.Column(
            "queue_names",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "status",
            sa.Enum("active", "draining", "stopped", "dead", name="worker_status"),
            server_default=sa.text("'active'"),
            nullable=False,
        ),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "last_heartbeat_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("in_flight", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    op.create_index(
        "ix_workers_alive_heartbeat",
        "workers",
        ["last_heartbeat_at"],
        unique=False,
        postgresql_where=sa.text("status IN ('active', 'draining')"),
    )
    op.create_table(
        "invitations",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column(
            "role",
            sa.Enum("owner", "admin", "member", "viewer", name="member_role"),
            nullable=False,
        ),
        sa.Column("invited_by", sa.UUID(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["invited_by"],
            ["users.id"],
            name=op.f("fk_invitations_invited_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_invitations_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_invitations")),
        sa.UniqueConstraint("org_id", "email", name=op.f("uq_invitations_org_id_email")),
    )
    op.create_table(
        "memberships",
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column(
            "role",
            sa.Enum("owner", "admin", "member", "viewer", name="member_role"),
            nullable=False,
        ),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_memberships_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_memberships_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("org_id", "user_id", name=op.f("pk_memberships")),
    )
    op.create_index("ix_memberships_user_id", "memberships", ["user_id"], unique=False)
    op.create_table(
        "projects",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("slug", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_projects_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("org_id", "slug", name=op.f("uq_projects_org_id_slug")),
    )
    op.create_table(
        "refresh_tokens",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("family_id", sa.UUID(), nullable=False),
        sa.Column("token_hash", sa.LargeBinary(), nullable=False),
        sa.Column(
            "issued_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rotated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("user_agent", sa.Text(), nullable=True),
        sa.Column("ip", postgresql.INET(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_refresh_tokens_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_refresh_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_refresh_tokens_token_hash")),
    )
    op.create_index("ix_refresh_tokens_family_id", "refresh_tokens", ["family_id"], unique=False)
    op.create_index("ix_refresh_tokens_user_id", "refresh_tokens", ["user_id"], unique=False)
    op.create_table(
        "worker_heartbeats",
        sa.Column("worker_id", sa.UUID(), nullable=False),
        sa.Column("minute", sa.DateTime(timezone=True), nullable=False),
        sa.Column("beats", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("max_in_flight", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_worker_heartbeats_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("worker_id", "minute", name=op.f("pk_worker_heartbeats")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("key_hash", sa.LargeBinary(), nullable=False),
        sa.Column(
            "role",
            sa.Enum("owner", "admin", "member", "viewer", name="member_role"),
            nullable=False,
        ),
        sa.Column("created_by", sa.UUID(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("octet_length(key_hash) = 32", name=op.f("ck_api_keys_sha256_length")),
        sa.ForeignKeyConstraint(
            ["created_by"],
            ["users.id"],
            name=op.f("fk_api_keys_created_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_api_keys_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    op.create_index("ix_api_keys_project_id", "api_keys", ["project_id"], unique=False)
    op.create_table(
        "retry_policies",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column(
            "strategy",
            sa.Enum("fixed", "linear", "exponential", name="backoff_strategy"),
            nullable=False,
        ),
        sa.Column("base_delay_ms", sa.Integer(), nullable=False),
        sa.Column("max_delay_ms", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("jitter", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "base_delay_ms >= 0 AND max_delay_ms >= base_delay_ms",
            name=op.f("ck_retry_policies_delays"),
        ),
        sa.CheckConstraint(
            "max_attempts BETWEEN 1 AND 100", name=op.f("ck_retry_policies_max_attempts_range")
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_retry_policies_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_retry_policies")),
        sa.UniqueConstraint("project_id", "name", name=op.f("uq_retry_policies_project_id_name")),
    )
    op.create_table(
        "audit_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=True),
        sa.Column("actor_user_id", sa.UUID(), nullable=True),
        sa.Column("actor_api_key_id", sa.UUID(), nullable=True),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("target_type", sa.Text(), nullable=True),
        sa.Column("target_id", sa.Text(), nullable=True),
        sa.Column(
            "details",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("ip", postgresql.INET(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["actor_api_key_id"],
            ["api_keys.id"],
            name=op.f("fk_audit_events_actor_api_key_id_api_keys"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["actor_user_id"],
            ["users.id"],
            name=op.f("fk_audit_events_actor_user_id_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_audit_events_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_audit_events_project_id_projects"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    op.create_index(
        "ix_audit_events_org_created",
        "audit_events",
        ["org_id", sa.literal_column("created_at DESC")],
        unique=False,
    )
    op.create_table(
        "queues",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("concurrency_limit", sa.Integer(), nullable=True),
        sa.Column("is_paused", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("retry_policy_id", sa.UUID(), nullable=True),
        sa.Column(
            "default_max_attempts", sa.Integer(), server_default=sa.text("3"), nullable=False
        ),
        sa.Column("default_timeout_ms", sa.Integer(), nullable=True),
        sa.Column("rate_limit_per_minute", sa.Integer(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'", name=op.f("ck_queues_name_format")
        ),
        sa.CheckConstraint(
            "concurrency_limit IS NULL OR concurrency_limit > 0",
            name=op.f("ck_queues_concurrency_limit_positive"),
        ),
        sa.CheckConstraint(
            "default_max_attempts BETWEEN 1 AND 100",
            name=op.f("ck_queues_default_max_attempts_range"),
        ),
        sa.CheckConstraint(
            "default_timeout_ms IS NULL OR default_timeout_ms > 0",
            name=op.f("ck_queues_default_timeout_positive"),
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_queues_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["retry_policy_id"],
            ["retry_policies.id"],
            name=op.f("fk_queues_retry_policy_id_retry_policies"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queues")),
        sa.UniqueConstraint("project_id", "name", name=op.f("uq_queues_project_id_name")),
    )
    op.create_table(
        "scheduled_jobs",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("queue_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("cron_expression", sa.Text(), nullable=False),
        sa.Column("timezone", sa.Text(), server_default=sa.text("'UTC'"), nullable=False),
        sa.Column("handler", sa.Text(), nullable=False),
        sa.Column(
            "payload",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_job_id", sa.BigInteger(), nullable=True),
        sa.Column("created_by", sa.UUID(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "octet_length(payload::text) <= 65536", name=op.f("ck_scheduled_jobs_payload_size")
        ),
        sa.ForeignKeyConstraint(
            ["created_by"],
            ["users.id"],
            name=op.f("fk_scheduled_jobs_created_by_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["queue_id"],
            ["queues.id"],
            name=op.f("fk_scheduled_jobs_queue_id_queues"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduled_jobs")),
        sa.UniqueConstraint("queue_id", "name", name=op.f("uq_scheduled_jobs_queue_id_name")),
    )
    op.create_index(
        "ix_scheduled_jobs_due",
        "scheduled_jobs",
        ["next_run_at"],
        unique=False,
        postgresql_where=sa.text("enabled"),
    )
    op.create_table(
        "worker_queues",
        sa.Column("worker_id", sa.UUID(), nullable=False),
        sa.Column("queue_id", sa.UUID(), nullable=False),
        sa.ForeignKeyConstraint(
            ["queue_id"],
            ["queues.id"],
            name=op.f("fk_worker_queues_queue_id_queues"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_worker_queues_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("worker_id", "queue_id", name=op.f("pk_worker_queues")),
    )
    op.create_index("ix_worker_queues_queue_id", "worker_queues", ["queue_id"], unique=False)
    op.create_table(
        "jobs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("queue_id", sa.UUID(), nullable=False),
        sa.Column("handler", sa.Text(), nullable=False),
        sa.Column(
            "payload",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "status",
            sa.Enum(
                "waiting",
                "scheduled",
                "queued",
                "claimed",
                "running",
                "completed",
                "failed",
                "dead_letter",
                "cancelled",
                name="job_status",
            ),
            nullable=False,
        ),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "run_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("attempt", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("retry_policy_id", sa.UUID(), nullable=True),
        sa.Column("timeout_ms", sa.Integer(), nullable=True),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("batch_id", sa.UUID(), nullable=True),
        sa.Column("schedule_id", sa.UUID(), nullable=True),
        sa.Column(
            "pending_dependencies", sa.Integer(), server_default=sa.text("0"), nullable=False
        ),
        sa.Column("worker_id", sa.UUID(), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lock_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("execution_seq", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("progress", sa.SmallInteger(), nullable=True),
        sa.Column("progress_message", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status NOT IN ('claimed', 'running') OR (worker_id IS NOT NULL AND lock_expires_at IS NOT NULL)",
            name=op.f("ck_jobs_leased_has_owner"),
        ),
        sa.CheckConstraint(
            "attempt >= 0 AND attempt <= max_attempts", name=op.f("ck_jobs_attempt_range")
        ),
        sa.CheckConstraint("execution_seq >= 0", name=op.f("ck_jobs_execution_seq_nonnegative")),
        sa.CheckConstraint(
            "max_attempts BETWEEN 1 AND 100", name=op.f("ck_jobs_max_attempts_range")
        ),
        sa.CheckConstraint(
            "octet_length(payload::text) <= 65536", name=op.f("ck_jobs_payload_size")
        ),
        sa.CheckConstraint(
            "pending_dependencies >= 0", name=op.f("ck_jobs_pending_dependencies_nonnegative")
        ),
        sa.CheckConstraint(
            "progress IS NULL OR progress BETWEEN 0 AND 100", name=op.f("ck_jobs_progress_range")
        ),
        sa.CheckConstraint(
            "timeout_ms IS NULL OR timeout_ms > 0", name=op.f("ck_jobs_timeout_positive")
        ),
        sa.ForeignKeyConstraint(
            ["queue_id"], ["queues.id"], name=op.f("fk_jobs_queue_id_queues"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["retry_policy_id"],
            ["retry_policies.id"],
            name=op.f("fk_jobs_retry_policy_id_retry_policies"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["scheduled_jobs.id"],
            name=op.f("fk_jobs_schedule_id_scheduled_jobs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_jobs_worker_id_workers"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint(
            "queue_id", "idempotency_key", name=op.f("uq_jobs_queue_id_idempotency_key")
        ),
        postgresql_with={
            "fillfactor": "80",
            "autovacuum_vacuum_scale_factor": "0.02",
            "autovacuum_analyze_scale_factor": "0.02",
        },
    )
    op.create_index(
        "idx_jobs_batch",
        "jobs",
        ["batch_id"],
        unique=False,
        postgresql_where=sa.text("batch_id IS NOT NULL"),
    )
    op.create_index(
        "idx_jobs_claim",
        "jobs",
        ["queue_id", sa.literal_column("priority DESC"), "run_at", "id"],
        unique=False,
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_index(
        "idx_jobs_finished",
        "jobs",
        ["finished_at"],
        unique=False,
        postgresql_where=sa.text("finished_at IS NOT NULL"),
    )
    op.create_index(
        "idx_jobs_lease_expiry",
        "jobs",
        ["lock_expires_at"],
        unique=False,
        postgresql_where=sa.text("status IN ('claimed', 'running')"),
    )
    op.create_index(
        "idx_jobs_queue_status_id",
        "jobs",
        ["queue_id", "status", sa.literal_column("id DESC")],
        unique=False,
    )
    op.create_index(
        "idx_jobs_scheduled_due",
        "jobs",
        ["run_at"],
        unique=False,
        postgresql_where=sa.text("status = 'scheduled'"),
    )
    op.create_index(
        "idx_jobs_worker_leased",
        "jobs",
        ["worker_id"],
        unique=False,
        postgresql_where=sa.text("status IN ('claimed', 'running')"),
    )
    # scheduled_jobs <-> jobs reference each other; this side is added once both exist.
    op.create_foreign_key(
        op.f("fk_scheduled_jobs_last_job_id_jobs"),
        "scheduled_jobs",
        "jobs",
        ["last_job_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.execute(LIFECYCLE_FUNCTION)
    op.execute(LIFECYCLE_TRIGGER)
    op.create_table(
        "dead_letter_jobs",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=True),
        sa.Column("queue_id", sa.UUID(), nullable=False),
        sa.Column("handler", sa.Text(), nullable=False),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column(
            "failed_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("replayed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("replay_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.CheckConstraint(
            "octet_length(payload::text) <= 65536", name=op.f("ck_dead_letter_jobs_payload_size")
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_dead_letter_jobs_job_id_jobs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["queue_id"],
            ["queues.id"],
            name=op.f("fk_dead_letter_jobs_queue_id_queues"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dead_letter_jobs")),
    )
    op.create_index("ix_dead_letter_jobs_job_id", "dead_letter_jobs", ["job_id"], unique=False)
    op.create_index(
        "ix_dead_letter_jobs_queue_pending",
        "dead_letter_jobs",
        ["queue_id", sa.literal_column("failed_at DESC")],
        unique=False,
        postgresql_where=sa.text("replayed_at IS NULL"),
    )
    op.create_table(
        "job_dependencies",
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("depends_on_id", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("job_id <> depends_on_id", name=op.f("ck_job_dependencies_not_self")),
        sa.ForeignKeyConstraint(
            ["depends_on_id"],
            ["jobs.id"],
            name=op.f("fk_job_dependencies_depends_on_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_job_dependencies_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "depends_on_id", name=op.f("pk_job_dependencies")),
    )
    op.create_index(
        "ix_job_dependencies_depends_on_id", "job_dependencies", ["depends_on_id"], unique=False
    )
    op.create_table(
        "job_executions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("queue_id", sa.UUID(), nullable=False),
        sa.Column("execution_seq", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.UUID(), nullable=True),
        sa.Column(
            "status",
            sa.Enum(
                "completed",
                "failed",
                "timed_out",
                "lost",
                "released",
                "cancelled",
                name="execution_status",
            ),
            nullable=False,
        ),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "finished_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("traceback", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_executions_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["queue_id"],
            ["queues.id"],
            name=op.f("fk_job_executions_queue_id_queues"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_job_executions_worker_id_workers"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_executions")),
        sa.UniqueConstraint(
            "job_id", "execution_seq", name=op.f("uq_job_executions_job_id_execution_seq")
        ),
    )
    op.create_index(
        "ix_job_executions_queue_finished",
        "job_executions",
        ["queue_id", "finished_at"],
        unique=False,
    )
    op.create_index("ix_job_executions_worker_id", "job_executions", ["worker_id"], unique=False)
    op.create_table(
        "job_logs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("execution_seq", sa.Integer(), nullable=False),
        sa.Column("level", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column(
            "fields",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("octet_length(message) <= 4096", name=op.f("ck_job_logs_message_size")),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_logs_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_logs")),
    )
    op.create_index("ix_job_logs_created_at", "job_logs", ["created_at"], unique=False)
    op.create_index("ix_job_logs_job_id", "job_logs", ["job_id", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_job_logs_job_id", table_name="job_logs")
    op.drop_index("ix_job_logs_created_at", table_name="job_logs")
    op.drop_table("job_logs")
    op.drop_index("ix_job_executions_worker_id", table_name="job_executions")
    op.drop_index("ix_job_executions_queue_finished", table_name="job_executions")
    op.drop_table("job_executions")
    op.drop_index("ix_job_dependencies_depends_on_id", table_name="job_dependencies")
    op.drop_table("job_dependencies")
    op.drop_index(
        "ix_dead_letter_jobs_queue_pending",
        table_name="dead_letter_jobs",
        postgresql_where=sa.text("replayed_at IS NULL"),
    )
    op.drop_index("ix_dead_letter_jobs_job_id", table_name="dead_letter_jobs")
    op.drop_table("dead_letter_jobs")
    op.drop_index(
        "idx_jobs_worker_leased",
        table_name="jobs",
        postgresql_where=sa.text("status IN ('claimed', 'running')"),
    )
    op.drop_index(
        "idx_jobs_scheduled_due",
        table_name="jobs",
        postgresql_where=sa.text("status = 'scheduled'"),
    )
    op.drop_index("idx_jobs_queue_status_id", table_name="jobs")
    op.drop_index(
        "idx_jobs_lease_expiry",
        table_name="jobs",
        postgresql_where=sa.text("status IN ('claimed', 'running')"),
    )
    op.drop_index(
        "idx_jobs_finished", table_name="jobs", postgresql_where=sa.text("finished_at IS NOT NULL")
    )
    op.drop_index(
        "idx_jobs_claim", table_name="jobs", postgresql_where=sa.text("status = 'queued'")
    )
    op.drop_index(
        "idx_jobs_batch", table_name="jobs", postgresql_where=sa.text("batch_id IS NOT NULL")
    )
    op.execute("DROP TRIGGER IF EXISTS jobs_lifecycle ON jobs")
    op.execute("DROP FUNCTION IF EXISTS codity_check_job_transition()")
    op.drop_constraint(
        op.f("fk_scheduled_jobs_last_job_id_jobs"), "scheduled_jobs", type_="foreignkey"
    )
    op.drop_table("jobs")
    op.drop_index("ix_worker_queues_queue_id", table_name="worker_queues")
    op.drop_table("worker_queues")
    op.drop_index(
        "ix_scheduled_jobs_due", table_name="scheduled_jobs", postgresql_where=sa.text("enabled")
    )
    op.drop_table("scheduled_jobs")
    op.drop_table("queues")
    op.drop_index("ix_audit_events_org_created", table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_table("retry_policies")
    op.drop_index("ix_api_keys_project_id", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("worker_heartbeats")
    op.drop_index("ix_refresh_tokens_user_id", table_name="refresh_tokens")
    op.drop_index("ix_refresh_tokens_family_id", table_name="refresh_tokens")
    op.drop_table("refresh_tokens")
    op.drop_table("projects")
    op.drop_index("ix_memberships_user_id", table_name="memberships")
    op.drop_table("memberships")
    op.drop_table("invitations")
    op.drop_index(
        "ix_workers_alive_heartbeat",
        table_name="workers",
        postgresql_where=sa.text("status IN ('active', 'draining')"),
    )
    op.drop_table("workers")
    op.drop_table("users")
    op.drop_index("ix_rate_limit_buckets_expires_at", table_name="rate_limit_buckets")
    op.drop_table("rate_limit_buckets")
    op.drop_table("organizations")
    for enum_name in ENUMS:
        op.execute(f"DROP TYPE IF EXISTS {enum_name}")
