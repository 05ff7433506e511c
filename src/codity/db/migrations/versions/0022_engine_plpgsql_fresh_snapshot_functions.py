"""engine: the fresh-snapshot helpers in PL/pgSQL, which keeps their plans

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05 16:45:00

codity_release_dependants (the dependants step of every completion) and codity_leased_in_queue
(the leased count of a concurrency-limited queue in every claim of it) were SQL functions. A SQL
function that is not inlined (these are VOLATILE and read tables, so they never are) is parsed
and planned again on every call: for codity_release_dependants that was 0.32 of the 0.46 ms
auto_explain gave a one-job completion, whether or not any job had dependants. PL/pgSQL keeps
its statements' plans for the session, and a VOLATILE PL/pgSQL function still takes a fresh
snapshot for each statement it runs, which is why the helpers exist (migration 0003): the
bodies and their snapshots are unchanged. The tests that remove the fresh snapshot and watch
the guarantee fail (tests/integration/core/test_core_concurrency.py, test_core_operations.py)
run against these definitions.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The bodies, unchanged from migration 0003: each function below runs one of them, in PL/pgSQL
# (the upgrade) or, as 0003 defined it, in SQL (the downgrade).
LEASED_COUNT = """SELECT count(*)::integer FROM jobs
          WHERE queue_id = queue AND status IN ('claimed', 'running')"""

RELEASE_AND_NOTIFY = """WITH dec AS (
    SELECT d.job_id, count(*)::integer AS n
    FROM job_dependencies d
    WHERE d.depends_on_id = ANY(completed)
    GROUP BY d.job_id
  ),
  released AS (
    UPDATE jobs j
    SET pending_dependencies = j.pending_dependencies - dec.n,
        status = (CASE WHEN j.pending_dependencies - dec.n > 0 THEN 'waiting'
                       WHEN j.run_at > now() THEN 'scheduled'
                       ELSE 'queued' END)::job_status,
        updated_at = now()
    FROM dec
    WHERE j.id = dec.job_id AND j.status = 'waiting'
    RETURNING j.queue_id, j.status
  )
  SELECT count(pg_notify('codity_jobs', q::text))::integer
  FROM (SELECT DISTINCT queue_id AS q FROM released WHERE status = 'queued') s"""

LEASED_IN_QUEUE = f"""
CREATE OR REPLACE FUNCTION codity_leased_in_queue(queue uuid) RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS $$
BEGIN
  RETURN ({LEASED_COUNT});
END
$$
"""

# PL/pgSQL takes the INTO at the end of the statement as well as after the select list.
RELEASE_DEPENDANTS = f"""
CREATE OR REPLACE FUNCTION codity_release_dependants(completed bigint[]) RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS $$
DECLARE
  woken integer;
BEGIN
  {RELEASE_AND_NOTIFY}
  INTO woken;
  RETURN woken;
END
$$
"""

# Migration 0003's definitions, restored by the downgrade.
SQL_LEASED_IN_QUEUE = f"""
CREATE OR REPLACE FUNCTION codity_leased_in_queue(queue uuid) RETURNS integer
LANGUAGE sql VOLATILE PARALLEL UNSAFE AS $$
  {LEASED_COUNT}
$$
"""

SQL_RELEASE_DEPENDANTS = f"""
CREATE OR REPLACE FUNCTION codity_release_dependants(completed bigint[]) RETURNS integer
LANGUAGE sql VOLATILE PARALLEL UNSAFE AS $$
  {RELEASE_AND_NOTIFY}
$$
"""


def upgrade() -> None:
    op.execute(LEASED_IN_QUEUE)
    op.execute(RELEASE_DEPENDANTS)


def downgrade() -> None:
    op.execute(SQL_RELEASE_DEPENDANTS)
    op.execute(SQL_LEASED_IN_QUEUE)
