"""engine: the single-column checks of `jobs` as domains, checked only where a column is written

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-07 05:00:00

PostgreSQL evaluates every CHECK constraint of a table on every UPDATE of a row, whatever the
statement sets, and reads each constraint back from its stored text and plans it again for every
statement (ExecRelCheck: once per statement, per constraint). `jobs` had nine. A claim or a
completion sets the status, the lease and the fence, yet it re-checked the payload's size
(`octet_length(payload::text)`: the whole payload printed as JSON text, for every row, on
every transition), the trace parent, the progress, the timeout and the rest.

Seven of the nine name one column each. They become domains over the column's type, with the
same expressions and the same constraint names, so a violation raises the same error
(check_violation, `ck_jobs_payload_size` and so on). A domain's check runs only when a value
is assigned to the column (an INSERT, an UPDATE that sets it), and its expression is prepared
once per connection (the type cache), not once per statement. The two that span columns stay
table CHECKs: `attempt_range` (attempt <= max_attempts) and `leased_has_owner`.

Server instructions (`.venv/bin/python bench/server_instructions.py`, a variant with the
domains beside the table as it was): a one-job enqueue 728k -> 608k, a one-job claim
1,270k -> 1,155k, a one-job completion 877k -> 738k, claim + completion in batches of 100
286.5k -> 280.8k per job. With payloads of about 1 KB the payload check alone was 6% of a
drain's CPU per job (the drain with it dropped vs as it was, `codity bench throughput`'s
drain with such payloads).

No table rewrite: each domain is created without its check, the column's type changes to it
(binary-compatible, so the table and its indexes keep their files), and the check is then added
to the domain, which validates the stored rows (one scan of `jobs`, under the ALTER's lock).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: column -> (domain, base type, constraint name, the domain's check, the table CHECK it replaces)
CHECKS = {
    "payload": (
        "jobs_payload",
        "jsonb",
        "ck_jobs_payload_size",
        "octet_length(VALUE::text) <= 65536",
        "octet_length(payload::text) <= 65536",
    ),
    "max_attempts": (
        "jobs_max_attempts",
        "integer",
        "ck_jobs_max_attempts_range",
        "VALUE BETWEEN 1 AND 100",
        "max_attempts BETWEEN 1 AND 100",
    ),
    "execution_seq": (
        "jobs_execution_seq",
        "integer",
        "ck_jobs_execution_seq_nonnegative",
        "VALUE >= 0",
        "execution_seq >= 0",
    ),
    "timeout_ms": (
        "jobs_timeout_ms",
        "integer",
        "ck_jobs_timeout_positive",
        "VALUE > 0",
        "timeout_ms IS NULL OR timeout_ms > 0",
    ),
    "progress": (
        "jobs_progress",
        "smallint",
        "ck_jobs_progress_range",
        "VALUE BETWEEN 0 AND 100",
        "progress IS NULL OR progress BETWEEN 0 AND 100",
    ),
    "pending_dependencies": (
        "jobs_pending_dependencies",
        "integer",
        "ck_jobs_pending_dependencies_nonnegative",
        "VALUE >= 0",
        "pending_dependencies >= 0",
    ),
    "trace_parent": (
        "jobs_trace_parent",
        "text",
        "ck_jobs_trace_parent_length",
        "octet_length(VALUE) <= 128",
        "octet_length(trace_parent) <= 128",
    ),
}


def upgrade() -> None:
    for domain, base, _, _, _ in CHECKS.values():
        op.execute(f"CREATE DOMAIN {domain} AS {base}")
    changes = [f"DROP CONSTRAINT {name}" for _, _, name, _, _ in CHECKS.values()]
    changes += [f"ALTER COLUMN {column} TYPE {d[0]}" for column, d in CHECKS.items()]
    op.execute(f"ALTER TABLE jobs {', '.join(changes)}")
    for domain, _, name, check, _ in CHECKS.values():
        op.execute(f"ALTER DOMAIN {domain} ADD CONSTRAINT {name} CHECK ({check})")


def downgrade() -> None:
    changes = [f"ALTER COLUMN {column} TYPE {d[1]}" for column, d in CHECKS.items()]
    changes += [
        f"ADD CONSTRAINT {name} CHECK ({table})" for _, _, name, _, table in CHECKS.values()
    ]
    op.execute(f"ALTER TABLE jobs {', '.join(changes)}")
    for domain, _, _, _, _ in CHECKS.values():
        op.execute(f"DROP DOMAIN {domain}")
