"""engine: the dependants step probes for dependants before it looks for them in earnest

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06 21:45:00

Every completion statement calls codity_release_dependants() once (complete_jobs), and most
completed jobs have no dependants at all. The function's one statement, a CTE that counts
dependencies, UPDATEs the waiting jobs it frees and NOTIFYs their queues, was started in full
every time: the start-up of an UPDATE of `jobs` (its thirteen indexes opened) for no row. In
server instructions (bench/server_instructions.py) that was 180k of a one-job completion's 1,342k.

The function is renamed codity_release_found_dependants, unchanged, and a new
codity_release_dependants calls it only when one probe of ix_job_dependencies_depends_on_id
finds a dependant. The probe is a statement of the VOLATILE function, so it takes a fresh
snapshot as the statement it guards does: an enqueue that share-locked a completed job and
committed its dependency rows while the completion waited for it is seen
(tests/integration/core/test_core_operations.py, the race test, runs against this).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PROBE_FIRST = """
CREATE FUNCTION codity_release_dependants(completed bigint[]) RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM job_dependencies WHERE depends_on_id = ANY(completed)) THEN
    RETURN 0;
  END IF;
  RETURN codity_release_found_dependants(completed);
END
$$
"""


def upgrade() -> None:
    op.execute(
        "ALTER FUNCTION codity_release_dependants(bigint[]) "
        "RENAME TO codity_release_found_dependants"
    )
    op.execute(PROBE_FIRST)


def downgrade() -> None:
    op.execute("DROP FUNCTION codity_release_dependants(bigint[])")
    op.execute(
        "ALTER FUNCTION codity_release_found_dependants(bigint[]) "
        "RENAME TO codity_release_dependants"
    )
