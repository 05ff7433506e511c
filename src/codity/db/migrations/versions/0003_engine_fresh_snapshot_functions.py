"""engine: fresh-snapshot helpers for the one-statement claim and completion

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 18:50:00

Two small VOLATILE functions. A VOLATILE function takes a fresh snapshot for each query it
runs, even when it is called from inside a larger statement: that is the only reason they
exist. The claim and the completion stay one statement each (one round trip) and still see
what other transactions committed while the statement waited for a lock:

- codity_leased_in_queue(queue): how many of the queue's jobs are leased *now*. The claim calls
  it after locking a concurrency-limited queue's row, so it counts every claim committed by the
  previous holder of that lock (the statement's own snapshot, taken before the wait, would not).
- codity_release_dependants(ids): the dependants step of a completion. Called after the
  completion's UPDATE, it sees job_dependencies rows an enqueue committed while the UPDATE
  waited on that enqueue's share lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LEASED_IN_QUEUE = """
CREATE FUNCTION codity_leased_in_queue(queue uuid) RETURNS integer
LANGUAGE sql VOLATILE PARALLEL UNSAFE AS $$
  SELECT count(*)::integer FROM jobs WHERE queue_id = queue AND status IN ('claimed', 'running')
$$
"""

RELEASE_DEPENDANTS = """
CREATE FUNCTION codity_release_dependants(completed bigint[]) RETURNS integer
LANGUAGE sql VOLATILE PARALLEL UNSAFE AS $$
  WITH dec AS (
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
  FROM (SELECT DISTINCT queue_id AS q FROM released WHERE status = 'queued') s
$$
"""


def upgrade() -> None:
    op.execute(LEASED_IN_QUEUE)
    op.execute(RELEASE_DEPENDANTS)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS codity_release_dependants(bigint[])")
    op.execute("DROP FUNCTION IF EXISTS codity_leased_in_queue(uuid)")
