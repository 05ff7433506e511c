"""live events: NOTIFY codity_events from statement-level triggers (one per statement, not per job)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 18:50:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The dashboard's live updates (docs/DASHBOARD.md, "Live updates"). Job state changes are
# reported once per STATEMENT, not once per row: a claim or a completion of 500 jobs sends one
# notification summarising them per (queue, new status), with at most 20 job ids per group.
# Transition tables hold the statement's old and new rows; an UPDATE that changed no status
# (a heartbeat extending leases, progress) sends nothing. NOTIFY is delivered at commit, so a
# rolled-back change is never announced. A summary that would not fit a notification (8000
# bytes) becomes '"*"': "something changed", and listeners refresh everything.
JOB_EVENTS_FUNCTION = """
CREATE FUNCTION codity_notify_job_changes() RETURNS trigger
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

WORKER_EVENTS_FUNCTION = """
CREATE FUNCTION codity_notify_worker_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('codity_events',
                    json_build_object('t', 'w', 'w', NEW.id, 's', NEW.status)::text);
  RETURN NULL;
END
$$
"""

QUEUE_EVENTS_FUNCTION = """
CREATE FUNCTION codity_notify_queue_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('codity_events',
                    json_build_object('t', 'q', 'q', NEW.id, 'p', NEW.project_id,
                                      'paused', NEW.is_paused)::text);
  RETURN NULL;
END
$$
"""

TRIGGERS = (
    """CREATE TRIGGER jobs_events_insert AFTER INSERT ON jobs
       REFERENCING NEW TABLE AS codity_new_jobs
       FOR EACH STATEMENT EXECUTE FUNCTION codity_notify_job_changes()""",
    """CREATE TRIGGER jobs_events_update AFTER UPDATE ON jobs
       REFERENCING OLD TABLE AS codity_old_jobs NEW TABLE AS codity_new_jobs
       FOR EACH STATEMENT EXECUTE FUNCTION codity_notify_job_changes()""",
    """CREATE TRIGGER workers_events_insert AFTER INSERT ON workers
       FOR EACH ROW EXECUTE FUNCTION codity_notify_worker_change()""",
    """CREATE TRIGGER workers_events_status AFTER UPDATE OF status ON workers
       FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
       EXECUTE FUNCTION codity_notify_worker_change()""",
    """CREATE TRIGGER queues_events_paused AFTER UPDATE OF is_paused ON queues
       FOR EACH ROW WHEN (OLD.is_paused IS DISTINCT FROM NEW.is_paused)
       EXECUTE FUNCTION codity_notify_queue_change()""",
)


def upgrade() -> None:
    op.execute(JOB_EVENTS_FUNCTION)
    op.execute(WORKER_EVENTS_FUNCTION)
    op.execute(QUEUE_EVENTS_FUNCTION)
    for statement in TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS queues_events_paused ON queues")
    op.execute("DROP TRIGGER IF EXISTS workers_events_status ON workers")
    op.execute("DROP TRIGGER IF EXISTS workers_events_insert ON workers")
    op.execute("DROP TRIGGER IF EXISTS jobs_events_update ON jobs")
    op.execute("DROP TRIGGER IF EXISTS jobs_events_insert ON jobs")
    op.execute("DROP FUNCTION IF EXISTS codity_notify_queue_change()")
    op.execute("DROP FUNCTION IF EXISTS codity_notify_worker_change()")
    op.execute("DROP FUNCTION IF EXISTS codity_notify_job_changes()")
