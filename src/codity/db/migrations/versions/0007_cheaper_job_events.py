"""cheaper job events: the UPDATE trigger keeps only the NEW transition table

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 20:10:00.000000

Measured after the engine's one-statement claim/complete landed, the 0005 UPDATE trigger cost
the drain 20-50% (`codity bench events --cost-runs 3`): it captured the OLD and the NEW rows of
every updated job and joined them to find status changes. Every statement of the engine that
moves a status also sets `updated_at = now()`, and the statements that do not (the heartbeat
extending leases) leave it alone, so `updated_at = now()` in the NEW rows alone says "changed
in this transaction": half the capture, no join. (Progress updates set it too without a status
change: a harmless extra refresh.)
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = """
CREATE OR REPLACE FUNCTION codity_notify_job_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  summary text;
BEGIN
  SELECT json_agg(json_build_array(g.queue_id, g.status, g.n, g.ids))::text INTO summary
  FROM (SELECT n.queue_id, n.status, count(*) AS n, (array_agg(n.id ORDER BY n.id DESC))[1:20] AS ids
        FROM codity_new_jobs n
        WHERE TG_OP = 'INSERT' OR n.updated_at = now()
        GROUP BY n.queue_id, n.status) g;
  IF summary IS NULL THEN
    RETURN NULL;
  END IF;
  IF octet_length(summary) > 7900 THEN
    summary := '"*"';
  END IF;
  PERFORM pg_notify('codity_events', '{"t":"j","c":' || summary || '}');
  RETURN NULL;
END
$$
"""

OLD_FUNCTION = """
CREATE OR REPLACE FUNCTION codity_notify_job_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  summary text;
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT json_agg(json_build_array(g.queue_id, g.status, g.n, g.ids))::text INTO summary
    FROM (SELECT n.queue_id, n.status, count(*) AS n, (array_agg(n.id ORDER BY n.id DESC))[1:20] AS ids
          FROM codity_new_jobs n GROUP BY n.queue_id, n.status) g;
  ELSE
    SELECT json_agg(json_build_array(g.queue_id, g.status, g.n, g.ids))::text INTO summary
    FROM (SELECT n.queue_id, n.status, count(*) AS n, (array_agg(n.id ORDER BY n.id DESC))[1:20] AS ids
          FROM codity_new_jobs n JOIN codity_old_jobs o ON o.id = n.id
          WHERE n.status IS DISTINCT FROM o.status
          GROUP BY n.queue_id, n.status) g;
  END IF;
  IF summary IS NULL THEN
    RETURN NULL;
  END IF;
  IF octet_length(summary) > 7900 THEN
    summary := '"*"';
  END IF;
  PERFORM pg_notify('codity_events', '{"t":"j","c":' || summary || '}');
  RETURN NULL;
END
$$
"""


def upgrade() -> None:
    op.execute(FUNCTION)
    op.execute("DROP TRIGGER IF EXISTS jobs_events_update ON jobs")
    op.execute(
        """CREATE TRIGGER jobs_events_update AFTER UPDATE ON jobs
           REFERENCING NEW TABLE AS codity_new_jobs
           FOR EACH STATEMENT EXECUTE FUNCTION codity_notify_job_changes()"""
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS jobs_events_update ON jobs")
    op.execute(OLD_FUNCTION)
    op.execute(
        """CREATE TRIGGER jobs_events_update AFTER UPDATE ON jobs
           REFERENCING OLD TABLE AS codity_old_jobs NEW TABLE AS codity_new_jobs
           FOR EACH STATEMENT EXECUTE FUNCTION codity_notify_job_changes()"""
    )
