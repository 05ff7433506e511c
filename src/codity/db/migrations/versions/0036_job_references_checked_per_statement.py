"""engine: a job's queue, retry policy and schedule checked once per statement, not per row

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-07 19:00:00

`jobs` had three foreign keys: `queue_id` (ON DELETE CASCADE), `retry_policy_id` and
`schedule_id` (SET NULL). PostgreSQL checks a foreign key with a trigger per inserted row that
opens the parent table and runs `SELECT 1 FROM parent WHERE id = $1 FOR KEY SHARE` through SPI
(executor start-up, an index probe, a row lock), and opens the other two parents even when the
value is NULL. Counted with callgrind over a bulk enqueue of 20,000 jobs (`core.enqueue_many`),
the three cost 39.8k of the server's 130k instructions a job, 30%; every update of a job
(claim, completion) also asked each of them whether its key had changed.

Migration 0015 did the same for the claim's worker and the execution rows (ADR-19); this does it
for the rest of `jobs`, with the same effect:

- `jobs_check_references` (AFTER INSERT, once per statement, the new rows as a transition
  table): the distinct queues, policies and schedules the statement's jobs name are locked
  FOR KEY SHARE, the lock a foreign key takes, so none can be deleted until the transaction
  ends; one that is missing raises `foreign_key_violation` with the old constraint's name, as
  the key did.
- `jobs_check_reference_change` (AFTER UPDATE OF the three columns, per row, only when one of
  them is given a new non-NULL value): the same check. The engine never sets them, so its
  updates do not fire it.
- What the keys did on delete, once per statement with the deleted rows as a transition table:
  `queues_delete_jobs` deletes a deleted queue's jobs (which `jobs_delete_executions` follows);
  `retry_policies_forget_deleted` and `scheduled_jobs_forget_deleted` null the reference.

One thing the key did that a trigger cannot: under REPEATABLE READ or SERIALIZABLE its cascade
saw (and refused, as a serialization failure) jobs another transaction enqueued into the queue
after the deleting transaction's snapshot; a trigger's DELETE sees only its snapshot and would
leave them. `queues_delete_jobs` therefore refuses to delete a queue outside READ COMMITTED
(PostgreSQL's default, and what the API and every cascade from a project or an organization
use), with a message that says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0036"
down_revision: str | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: (constraint, column, parent, on delete): the foreign keys of `jobs` this revision replaces.
REPLACED_FKS = (
    ("fk_jobs_queue_id_queues", "queue_id", "queues", "CASCADE"),
    ("fk_jobs_retry_policy_id_retry_policies", "retry_policy_id", "retry_policies", "SET NULL"),
    ("fk_jobs_schedule_id_scheduled_jobs", "schedule_id", "scheduled_jobs", "SET NULL"),
)

# Raised as the foreign key raised it: same code, constraint, table and message.
MISSING_PARENT = """
CREATE FUNCTION codity_missing_job_reference(fk text, col text, parent text, id uuid)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'insert or update on table "jobs" violates foreign key constraint "%"', fk
    USING ERRCODE = 'foreign_key_violation', CONSTRAINT = fk, TABLE = 'jobs',
          DETAIL = format('Key (%s)=(%s) is not present in table "%s".', col, id, parent);
END
$$
"""

# The row lock a foreign key takes (FOR KEY SHARE), once per distinct parent: a concurrent delete
# of it waits until this transaction ends, and its trigger then sees these jobs. Fewer rows locked
# than distinct ids: a parent is missing (or was deleted by a transaction that committed first).
# Three blocks of one shape rather than one block over a table name: static SQL keeps its plan,
# where EXECUTE would plan again for every enqueue that names a policy or a schedule.
REQUIRE_REFERENCES = """
CREATE FUNCTION codity_require_job_references(queue_ids uuid[], policy_ids uuid[],
                                              schedule_ids uuid[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  locked bigint;
BEGIN
  IF cardinality(queue_ids) > 0 THEN
    PERFORM 1 FROM queues WHERE id = ANY(queue_ids) FOR KEY SHARE;
    GET DIAGNOSTICS locked = ROW_COUNT;
    IF locked < cardinality(queue_ids) THEN
      PERFORM codity_missing_job_reference('fk_jobs_queue_id_queues', 'queue_id', 'queues',
        (SELECT i FROM unnest(queue_ids) i
         WHERE NOT EXISTS (SELECT 1 FROM queues p WHERE p.id = i) LIMIT 1));
    END IF;
  END IF;
  IF cardinality(policy_ids) > 0 THEN
    PERFORM 1 FROM retry_policies WHERE id = ANY(policy_ids) FOR KEY SHARE;
    GET DIAGNOSTICS locked = ROW_COUNT;
    IF locked < cardinality(policy_ids) THEN
      PERFORM codity_missing_job_reference('fk_jobs_retry_policy_id_retry_policies',
        'retry_policy_id', 'retry_policies',
        (SELECT i FROM unnest(policy_ids) i
         WHERE NOT EXISTS (SELECT 1 FROM retry_policies p WHERE p.id = i) LIMIT 1));
    END IF;
  END IF;
  IF cardinality(schedule_ids) > 0 THEN
    PERFORM 1 FROM scheduled_jobs WHERE id = ANY(schedule_ids) FOR KEY SHARE;
    GET DIAGNOSTICS locked = ROW_COUNT;
    IF locked < cardinality(schedule_ids) THEN
      PERFORM codity_missing_job_reference('fk_jobs_schedule_id_scheduled_jobs', 'schedule_id',
        'scheduled_jobs',
        (SELECT i FROM unnest(schedule_ids) i
         WHERE NOT EXISTS (SELECT 1 FROM scheduled_jobs p WHERE p.id = i) LIMIT 1));
    END IF;
  END IF;
END
$$
"""

# The queue is checked inline (every statement names one), with one pass over the new rows to
# learn whether any names a policy or a schedule (rare; the helper then checks those): each
# further query or nested PL/pgSQL call is paid by every one-job enqueue (ADR-28).
CHECK_INSERTED = """
CREATE FUNCTION codity_check_job_references() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  refs record;
  locked bigint;
BEGIN
  SELECT array_agg(DISTINCT queue_id) AS queues,
         bool_or(retry_policy_id IS NOT NULL OR schedule_id IS NOT NULL) AS others
  INTO refs FROM codity_inserted_jobs;
  IF refs.queues IS NULL THEN
    RETURN NULL;  -- the statement inserted no row
  END IF;
  PERFORM 1 FROM queues WHERE id = ANY(refs.queues) FOR KEY SHARE;
  GET DIAGNOSTICS locked = ROW_COUNT;
  IF locked < cardinality(refs.queues) OR refs.others THEN
    PERFORM codity_require_job_references(
      -- the queues only when one is missing: they are locked already otherwise
      CASE WHEN locked < cardinality(refs.queues) THEN refs.queues END,
      ARRAY(SELECT DISTINCT retry_policy_id FROM codity_inserted_jobs
            WHERE retry_policy_id IS NOT NULL),
      ARRAY(SELECT DISTINCT schedule_id FROM codity_inserted_jobs WHERE schedule_id IS NOT NULL));
  END IF;
  RETURN NULL;
END
$$
"""

CHECK_CHANGED = """
CREATE FUNCTION codity_check_job_reference_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM codity_require_job_references(
    CASE WHEN NEW.queue_id IS DISTINCT FROM OLD.queue_id THEN ARRAY[NEW.queue_id] END,
    CASE WHEN NEW.retry_policy_id IS DISTINCT FROM OLD.retry_policy_id
         THEN array_remove(ARRAY[NEW.retry_policy_id], NULL) END,
    CASE WHEN NEW.schedule_id IS DISTINCT FROM OLD.schedule_id
         THEN array_remove(ARRAY[NEW.schedule_id], NULL) END);
  RETURN NULL;
END
$$
"""

DELETE_QUEUE_JOBS = """
CREATE FUNCTION codity_delete_queue_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  gone uuid[] := ARRAY(SELECT id FROM codity_deleted_queues);
BEGIN
  IF cardinality(gone) = 0 THEN
    RETURN NULL;
  END IF;
  -- Under READ COMMITTED this DELETE takes a fresh snapshot and sees every job committed into
  -- the queue before its row was deleted (an enqueue holds the queue's row lock until it
  -- commits). Under a transaction snapshot it would not: refuse rather than leave them.
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'a queue can only be deleted in a READ COMMITTED transaction'
      USING ERRCODE = 'feature_not_supported',
            DETAIL = format('Under %s the delete could not see jobs another transaction '
                            'enqueued into the queue after this one began.',
                            current_setting('transaction_isolation')),
            HINT = 'Delete it in a READ COMMITTED transaction (PostgreSQL''s default).';
  END IF;
  DELETE FROM jobs WHERE queue_id = ANY(gone);
  RETURN NULL;
END
$$
"""

# SET NULL for either parent: TG_ARGV[0] names the column of jobs that pointed at the deleted
# rows. Dynamic SQL, planned per delete statement: deletes of policies and schedules are rare.
FORGET_DELETED_PARENTS = """
CREATE FUNCTION codity_forget_deleted_job_parents() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('UPDATE jobs SET %1$I = NULL '
                 'WHERE %1$I = ANY(ARRAY(SELECT id FROM codity_deleted_parents))', TG_ARGV[0]);
  RETURN NULL;
END
$$
"""

TRIGGERS = (
    "CREATE TRIGGER jobs_check_references AFTER INSERT ON jobs "
    "REFERENCING NEW TABLE AS codity_inserted_jobs FOR EACH STATEMENT "
    "EXECUTE FUNCTION codity_check_job_references()",
    "CREATE TRIGGER jobs_check_reference_change "
    "AFTER UPDATE OF queue_id, retry_policy_id, schedule_id ON jobs FOR EACH ROW "
    "WHEN (NEW.queue_id IS DISTINCT FROM OLD.queue_id "
    "OR (NEW.retry_policy_id IS NOT NULL AND NEW.retry_policy_id IS DISTINCT FROM "
    "OLD.retry_policy_id) "
    "OR (NEW.schedule_id IS NOT NULL AND NEW.schedule_id IS DISTINCT FROM OLD.schedule_id)) "
    "EXECUTE FUNCTION codity_check_job_reference_change()",
    "CREATE TRIGGER queues_delete_jobs AFTER DELETE ON queues "
    "REFERENCING OLD TABLE AS codity_deleted_queues FOR EACH STATEMENT "
    "EXECUTE FUNCTION codity_delete_queue_jobs()",
    "CREATE TRIGGER retry_policies_forget_deleted AFTER DELETE ON retry_policies "
    "REFERENCING OLD TABLE AS codity_deleted_parents FOR EACH STATEMENT "
    "EXECUTE FUNCTION codity_forget_deleted_job_parents('retry_policy_id')",
    "CREATE TRIGGER scheduled_jobs_forget_deleted AFTER DELETE ON scheduled_jobs "
    "REFERENCING OLD TABLE AS codity_deleted_parents FOR EACH STATEMENT "
    "EXECUTE FUNCTION codity_forget_deleted_job_parents('schedule_id')",
)

#: (trigger, table) in the reverse order of TRIGGERS; then the functions, callers first.
DROPPED_TRIGGERS = (
    ("scheduled_jobs_forget_deleted", "scheduled_jobs"),
    ("retry_policies_forget_deleted", "retry_policies"),
    ("queues_delete_jobs", "queues"),
    ("jobs_check_reference_change", "jobs"),
    ("jobs_check_references", "jobs"),
)
DROPPED_FUNCTIONS = (
    "codity_forget_deleted_job_parents()",
    "codity_delete_queue_jobs()",
    "codity_check_job_reference_change()",
    "codity_check_job_references()",
    "codity_require_job_references(uuid[], uuid[], uuid[])",
    "codity_missing_job_reference(text, text, text, uuid)",
)


def upgrade() -> None:
    for name, _, _, _ in REPLACED_FKS:
        op.drop_constraint(name, "jobs", type_="foreignkey")
    for function in (
        MISSING_PARENT,
        REQUIRE_REFERENCES,
        CHECK_INSERTED,
        CHECK_CHANGED,
        DELETE_QUEUE_JOBS,
        FORGET_DELETED_PARENTS,
    ):
        op.execute(function)
    for trigger in TRIGGERS:
        op.execute(trigger)


def downgrade() -> None:
    for trigger, table in DROPPED_TRIGGERS:
        op.execute(f"DROP TRIGGER {trigger} ON {table}")
    for function in DROPPED_FUNCTIONS:
        op.execute(f"DROP FUNCTION {function}")
    for name, column, parent, ondelete in REPLACED_FKS:
        # Rows the triggers' era left without a parent would fail the key: none should exist
        # (the triggers keep the same promises), but a hand-written row might; do what the key
        # would have done on the parent's delete.
        orphaned = f"NOT EXISTS (SELECT 1 FROM {parent} p WHERE p.id = j.{column})"
        if ondelete == "CASCADE":
            op.execute(f"DELETE FROM jobs j WHERE {orphaned}")
        else:
            op.execute(
                f"UPDATE jobs j SET {column} = NULL WHERE {column} IS NOT NULL AND {orphaned}"
            )
        op.create_foreign_key(name, "jobs", parent, [column], ["id"], ondelete=ondelete)
