"""engine: the job lifecycle check runs AFTER the row is written, so no update locks it first

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-07 23:30:00

`jobs_lifecycle` was the one BEFORE UPDATE row trigger on `jobs`. A table with any BEFORE
UPDATE row trigger has every row an UPDATE changes fetched *and locked* before it is written
(PostgreSQL's trigger.c: ExecBRUpdateTriggers -> GetTupleForTrigger -> table_tuple_lock), so the
trigger sees a stable OLD row; that happens before the trigger's WHEN clause is asked, so for an
allowed transition too. For a row the statement has not already locked (a completion, a running
mark, a heartbeat's lease extension) that is a second write of the row: `heap_lock_tuple` sets
the row's xmax, logs an XLOG_HEAP_LOCK record, and the update then writes it again.

The check is now an AFTER UPDATE OF status row trigger with the same WHEN clause and the same
function: an allowed change still fires nothing; a forbidden one still raises SQLSTATE 23514
with constraint name `jobs_lifecycle`, at the end of the statement instead of before the row is
written, so the statement fails and writes nothing all the same. Counted with callgrind
(bench/server_instructions.py, thousands of instructions): the batch drain's claim + completion
262.6 -> 257.4 a job, a one-job claim 1,118.1 -> 1,114.6, a one-job completion 718.9 -> 715.2.
tests/integration/test_lifecycle_trigger.py counts the heap LOCK records a running mark, a
heartbeat and a completion write (none; three a write with the old trigger), and
tests/integration/core/test_core_operations.py still tries every (from, to) pair against the map.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0037"
down_revision: str | None = "0036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _trigger(timing: str) -> str:
    # The WHEN clause of migration 0023, unchanged.
    return f"""
CREATE TRIGGER jobs_lifecycle {timing} UPDATE OF status ON jobs
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
    AND NOT codity_job_transition_allowed(OLD.status, NEW.status))
  EXECUTE FUNCTION codity_check_job_transition()
"""


def upgrade() -> None:
    op.execute("DROP TRIGGER jobs_lifecycle ON jobs")
    op.execute(_trigger("AFTER"))


def downgrade() -> None:
    op.execute("DROP TRIGGER jobs_lifecycle ON jobs")
    op.execute(_trigger("BEFORE"))
