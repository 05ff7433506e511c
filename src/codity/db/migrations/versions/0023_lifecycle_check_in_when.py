"""engine: the job lifecycle check in the trigger's WHEN clause

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06 20:30:00

Every status change of a job (three per job: claimed, then completed or failed, at the least)
called codity_check_job_transition(), a PL/pgSQL trigger function, once per row: a function
call, a PL/pgSQL frame and an expression evaluated through SPI. The trigger's WHEN clause is an
ordinary expression the executor evaluates in place, so the allowed-map moves there: the
trigger now fires only for an edge the map lacks, and its function (unchanged from 0001) then
raises the same error, with the same code and constraint name. The map is the same edge for
edge; tests/integration/core/test_core_operations.py tries every pair of statuses against it
and codity.domain.states.ALLOWED_TRANSITIONS. In the drain's profile (perf, the throughput
benchmark) the row trigger was about a tenth of the server's time per job.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The allowed-map of migration 0001's codity_check_job_transition(), as an expression.
ALLOWED = """CASE OLD.status
      WHEN 'waiting' THEN NEW.status IN ('queued', 'scheduled', 'cancelled')
      WHEN 'scheduled' THEN NEW.status IN ('queued', 'cancelled')
      WHEN 'queued' THEN NEW.status IN ('claimed', 'scheduled', 'cancelled')
      WHEN 'claimed' THEN NEW.status IN ('running', 'queued', 'completed', 'failed', 'scheduled', 'dead_letter', 'cancelled')
      WHEN 'running' THEN NEW.status IN ('completed', 'failed', 'queued', 'scheduled', 'dead_letter', 'cancelled')
      WHEN 'failed' THEN NEW.status IN ('scheduled', 'queued', 'dead_letter')
      WHEN 'dead_letter' THEN NEW.status IN ('queued')
      WHEN 'cancelled' THEN NEW.status IN ('queued')
      ELSE false
    END"""


def _trigger(when: str) -> str:
    return f"""
CREATE OR REPLACE TRIGGER jobs_lifecycle BEFORE UPDATE OF status ON jobs
  FOR EACH ROW WHEN ({when})
  EXECUTE FUNCTION codity_check_job_transition()
"""


def upgrade() -> None:
    op.execute(_trigger(f"OLD.status IS DISTINCT FROM NEW.status AND NOT ({ALLOWED})"))


def downgrade() -> None:
    op.execute(_trigger("OLD.status IS DISTINCT FROM NEW.status"))
