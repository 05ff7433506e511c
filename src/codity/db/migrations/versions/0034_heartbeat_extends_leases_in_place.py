"""engine: no index on the lease's expiry, so a heartbeat extends a lease in place (HOT)

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-07 07:00:00

`idx_jobs_lease_expiry (lock_expires_at) WHERE status IN ('claimed', 'running')` served one
statement, the reaper's search for leases that ran out. It cost two things:

- every heartbeat changed an indexed column for every job the worker held (its new
  `lock_expires_at`), so no extension was ever a HOT update: each wrote a new entry into every
  index of `jobs` (the primary key, `(queue_id, status, id)`, the payload GIN, both lease
  indexes, and the finished/key/unique ones where they apply), each one later vacuumed away.
  A fleet holding 10,000 long jobs with a 5 s beat wrote 2,000 such row versions a second,
  for nothing but a new expiry.
- every claim wrote an entry into it, and every completion left one to vacuum.

The reaper now reads `idx_jobs_worker_leased` instead, the partial index of every leased job
(the heartbeat's and the dead-worker sweep's): the leased jobs are as many as the fleet's
capacity, whatever the backlog or the history, and the reaper sorts the expired ones it finds.
`lock_expires_at` is in no index any more, so a heartbeat's extension, which changes nothing
else, stays on its page (HOT) whenever the page has room (`fillfactor = 80` leaves it).

Server instructions (`.venv/bin/python bench/server_instructions.py --sql`, the index dropped
beside the schema as it was): claim + completion in batches of 100, 278.1k -> 270.4k
instructions a job. A worker holding 1,000 jobs (`.venv/bin/python bench/heartbeat_cost.py`):
a beat 16.7 -> 7.3 ms, its extensions 0% -> 95% HOT (docs/DESIGN_DECISIONS.md, ADR-25).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("idx_jobs_lease_expiry", table_name="jobs")


def downgrade() -> None:
    op.execute(
        "CREATE INDEX idx_jobs_lease_expiry ON jobs (lock_expires_at) "
        "WHERE status IN ('claimed', 'running')"
    )
