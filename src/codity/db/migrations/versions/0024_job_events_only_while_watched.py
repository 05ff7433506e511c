"""live events: the jobs triggers fire only while a dashboard watches

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06 22:05:00

`jobs_events_insert` and `jobs_events_update` (migrations 0005, 0007) summarised every
statement that wrote jobs and sent it as a NOTIFY on `codity_events`, whether or not any
browser had the dashboard open. Each firing was a PL/pgSQL call with a query over the statement's
rows, and each NOTIFY woke every backend LISTENing in the database, every worker's wake-up
connection included (PostgreSQL signals all of a database's listeners, whatever their
channels): three times per job. Counted in server instructions (callgrind, one enqueue, claim or
completion of one job on a connection of its own): about 115k of an enqueue's 810k and 100k of a
claim's, for no reader.

Now each trigger has a WHEN clause that reads one value, `codity_events_watched_until`: a
sequence the API's event hub sets to a Unix time 30 s ahead while it has subscribers, again
every 10 s (codity.api.events). A sequence because `setval` is seen by every session at once,
with no transaction, no row version and no vacuum, and `pg_sequence_last_value()` reads it
without a query. Past that time, or before any hub set it (NULL), no event is sent. A hub sets
it before it answers a new subscriber's stream, so nothing after the stream's `hello` is missed.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The hub's flag (see the module's docstring and codity.api.events.WATCH_S).
WATCHED = "pg_sequence_last_value('codity_events_watched_until') > extract(epoch FROM now())"


def _triggers(when: str) -> list[str]:
    return [
        "DROP TRIGGER IF EXISTS jobs_events_insert ON jobs",
        f"""CREATE TRIGGER jobs_events_insert AFTER INSERT ON jobs
           REFERENCING NEW TABLE AS codity_new_jobs
           FOR EACH STATEMENT {when}EXECUTE FUNCTION codity_notify_job_changes()""",
        "DROP TRIGGER IF EXISTS jobs_events_update ON jobs",
        f"""CREATE TRIGGER jobs_events_update AFTER UPDATE ON jobs
           REFERENCING NEW TABLE AS codity_new_jobs
           FOR EACH STATEMENT {when}EXECUTE FUNCTION codity_notify_job_changes()""",
    ]


def upgrade() -> None:
    op.execute("CREATE SEQUENCE codity_events_watched_until AS bigint MINVALUE 0 NO CYCLE")
    for statement in _triggers(f"WHEN ({WATCHED}) "):
        op.execute(statement)


def downgrade() -> None:
    for statement in _triggers(""):
        op.execute(statement)
    op.execute("DROP SEQUENCE codity_events_watched_until")
