"""engine: the job lifecycle check in the trigger's WHEN clause, through an IMMUTABLE function

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06 20:30:00

Every status change of a job (three per job: claimed, then completed or failed, at the least)
fired codity_check_job_transition(), a PL/pgSQL trigger function, once per row: a trigger call
builds the OLD and NEW records for PL/pgSQL, whatever the function then does. Now the trigger's
WHEN clause asks codity_job_transition_allowed(OLD.status, NEW.status), an IMMUTABLE PL/pgSQL
function of two enum values (the allowed-map of 0001, unchanged), and the trigger fires only
for an edge the map lacks: its function (also unchanged) then raises the same error, with the
same code and constraint name. tests/integration/core/test_core_operations.py tries every pair
of statuses against it and codity.domain.states.ALLOWED_TRANSITIONS.

Why a function and not the map itself in the WHEN clause: PostgreSQL reads a trigger's WHEN
expression back from its stored text and prepares it for every statement, and the map's CASE
made that 340k server instructions per claim or completion statement (a one-job claim
1,246k -> 1,584k, measured with bench/server_instructions.py), more than the trigger calls it
saved in a batch of 100. The call keeps the stored expression small. Figures, one job / claim +
completion per job in batches of 100, thousands of instructions: before 1,246 / 285.0; the map
in WHEN 1,584 / 278.3; the function in WHEN 1,258 / 277.2.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The allowed-map of migration 0001's codity_check_job_transition(), as a function.
ALLOWED = """
CREATE FUNCTION codity_job_transition_allowed(old job_status, new job_status) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN CASE old
      WHEN 'waiting' THEN new IN ('queued', 'scheduled', 'cancelled')
      WHEN 'scheduled' THEN new IN ('queued', 'cancelled')
      WHEN 'queued' THEN new IN ('claimed', 'scheduled', 'cancelled')
      WHEN 'claimed' THEN new IN ('running', 'queued', 'completed', 'failed', 'scheduled', 'dead_letter', 'cancelled')
      WHEN 'running' THEN new IN ('completed', 'failed', 'queued', 'scheduled', 'dead_letter', 'cancelled')
      WHEN 'failed' THEN new IN ('scheduled', 'queued', 'dead_letter')
      WHEN 'dead_letter' THEN new IN ('queued')
      WHEN 'cancelled' THEN new IN ('queued')
      ELSE false
    END;
END
$$
"""


def _trigger(when: str) -> str:
    return f"""
CREATE OR REPLACE TRIGGER jobs_lifecycle BEFORE UPDATE OF status ON jobs
  FOR EACH ROW WHEN ({when})
  EXECUTE FUNCTION codity_check_job_transition()
"""


def upgrade() -> None:
    op.execute(ALLOWED)
    op.execute(
        _trigger(
            "OLD.status IS DISTINCT FROM NEW.status"
            " AND NOT codity_job_transition_allowed(OLD.status, NEW.status)"
        )
    )


def downgrade() -> None:
    op.execute(_trigger("OLD.status IS DISTINCT FROM NEW.status"))
    op.execute("DROP FUNCTION codity_job_transition_allowed(job_status, job_status)")
