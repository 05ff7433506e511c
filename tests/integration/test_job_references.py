"""A job's queue, retry policy and schedule: the promises their foreign keys made, kept by the
per-statement triggers of migration 0036 (ADR-28). Every test here fails when its trigger, or
the row lock it takes, is removed; the break-it twins remove the lock and show the race it
closes.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import asyncpg
import pytest
from tests.factories import (
    make_execution,
    make_job,
    make_queue,
    make_retry_policy,
    make_schedule,
    make_tenant,
)

from codity import core
from codity.db import migrate
from codity.db.pool import connect

Conn = asyncpg.Connection  # the `db` fixture


async def _jobs_of(db: Conn, queue_id: uuid.UUID) -> int:
    return int(await db.fetchval("SELECT count(*) FROM jobs WHERE queue_id = $1", queue_id))


async def _job_naming_a_policy_and_a_schedule(db: Conn) -> tuple[int, uuid.UUID, uuid.UUID]:
    """(job id, its retry policy, its schedule), all three existing."""
    tenant = await make_tenant(db)
    policy_id = await make_retry_policy(db, tenant.project_id)
    queue_id = await make_queue(db, tenant.project_id)
    schedule_id = await make_schedule(db, queue_id, next_run_at=datetime.now(UTC))
    job_id = await make_job(db, queue_id, retry_policy_id=policy_id, schedule_id=schedule_id)
    return job_id, policy_id, schedule_id


async def _policy_and_schedule_of(db: Conn, job_id: int) -> tuple[object, object]:
    row = await db.fetchrow("SELECT retry_policy_id, schedule_id FROM jobs WHERE id = $1", job_id)
    assert row is not None
    return row["retry_policy_id"], row["schedule_id"]


# --- a reference to nothing is refused, as the foreign key refused it ------------------------


async def test_a_job_of_a_queue_that_does_not_exist_is_refused(db: Conn) -> None:
    missing = uuid.uuid4()
    with pytest.raises(asyncpg.ForeignKeyViolationError) as caught:
        await make_job(db, missing)
    assert caught.value.constraint_name == "fk_jobs_queue_id_queues"
    assert caught.value.table_name == "jobs"
    assert str(missing) in (caught.value.detail or "")
    assert await db.fetchval("SELECT count(*) FROM jobs") == 0


#: (column of jobs, the constraint name its check raises): the three references of a job.
REFERENCES = [
    ("queue_id", "fk_jobs_queue_id_queues"),
    ("retry_policy_id", "fk_jobs_retry_policy_id_retry_policies"),
    ("schedule_id", "fk_jobs_schedule_id_scheduled_jobs"),
]


@pytest.mark.parametrize(("column", "constraint"), REFERENCES[1:])
async def test_a_job_naming_a_missing_policy_or_schedule_is_refused(
    db: Conn, column: str, constraint: str
) -> None:
    queue_id = await make_queue(db)
    with pytest.raises(asyncpg.ForeignKeyViolationError) as caught:
        await make_job(db, queue_id, **{column: uuid.uuid4()})
    assert caught.value.constraint_name == constraint
    assert await _jobs_of(db, queue_id) == 0


async def test_one_bad_row_of_a_many_row_statement_refuses_the_statement(db: Conn) -> None:
    """The check runs once per statement: one row of fifty naming a missing queue, no row
    written. (core.enqueue checks its queue and policies before it inserts; this is the
    statement any other writer might send.)"""
    queue_id = await make_queue(db)
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await db.execute(
            """INSERT INTO jobs (queue_id, handler, status, max_attempts)
               SELECT CASE WHEN g = 50 THEN $2::uuid ELSE $1::uuid END, 'h', 'queued', 3
               FROM generate_series(1, 50) g""",
            queue_id,
            uuid.uuid4(),
        )
    assert await _jobs_of(db, queue_id) == 0


async def test_references_that_exist_are_accepted(db: Conn) -> None:
    job_id, policy_id, schedule_id = await _job_naming_a_policy_and_a_schedule(db)
    assert await _policy_and_schedule_of(db, job_id) == (policy_id, schedule_id)


@pytest.mark.parametrize(("column", "constraint"), REFERENCES)
async def test_an_update_to_a_missing_parent_is_refused(
    db: Conn, column: str, constraint: str
) -> None:
    queue_id = await make_queue(db)
    job_id = await make_job(db, queue_id)
    with pytest.raises(asyncpg.ForeignKeyViolationError) as caught:
        await db.execute(f"UPDATE jobs SET {column} = $1 WHERE id = $2", uuid.uuid4(), job_id)
    assert caught.value.constraint_name == constraint


async def test_a_job_can_move_to_a_queue_that_exists_and_drop_its_policy(db: Conn) -> None:
    tenant = await make_tenant(db)
    policy_id = await make_retry_policy(db, tenant.project_id)
    first, second = await make_queue(db, tenant.project_id), await make_queue(db, tenant.project_id)
    job_id = await make_job(db, first, retry_policy_id=policy_id)
    await db.execute(
        "UPDATE jobs SET queue_id = $1, retry_policy_id = NULL WHERE id = $2", second, job_id
    )
    assert await _jobs_of(db, second) == 1


# --- what the keys did on delete --------------------------------------------------------------


async def test_deleting_a_queue_deletes_its_jobs_and_their_executions(db: Conn) -> None:
    tenant = await make_tenant(db)
    queue_id, other = (
        await make_queue(db, tenant.project_id),
        await make_queue(db, tenant.project_id),
    )
    job_id = await make_job(db, queue_id, status="completed", attempt=1)
    await make_execution(db, job_id, queue_id, status="completed")
    kept = await make_job(db, other)

    await db.execute("DELETE FROM queues WHERE id = $1", queue_id)

    assert await _jobs_of(db, queue_id) == 0
    assert await db.fetchval("SELECT count(*) FROM job_executions WHERE job_id = $1", job_id) == 0
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE id = $1", kept) == 1


async def test_deleting_a_policy_or_a_schedule_keeps_the_jobs_and_forgets_it(db: Conn) -> None:
    job_id, policy_id, schedule_id = await _job_naming_a_policy_and_a_schedule(db)

    await db.execute("DELETE FROM retry_policies WHERE id = $1", policy_id)
    await db.execute("DELETE FROM scheduled_jobs WHERE id = $1", schedule_id)

    assert await _policy_and_schedule_of(db, job_id) == (None, None)


async def test_the_downgrade_does_to_orphans_what_the_keys_would_have_done(
    empty_database_url: str,
) -> None:
    """Back to 0035, the keys return; a row left without a parent (written with the triggers
    off) is first deleted (no queue) or loses its reference (no policy, no schedule)."""
    migrate.upgrade(empty_database_url)
    db = await connect(empty_database_url)
    try:
        job_id, policy_id, schedule_id = await _job_naming_a_policy_and_a_schedule(db)
        queue_id = await make_queue(db)
        orphan = await make_job(db, queue_id)
        await db.execute("SET session_replication_role = replica")  # no triggers: parents go
        await db.execute("DELETE FROM retry_policies WHERE id = $1", policy_id)
        await db.execute("DELETE FROM scheduled_jobs WHERE id = $1", schedule_id)
        await db.execute("DELETE FROM queues WHERE id = $1", queue_id)
        await db.execute("RESET session_replication_role")

        await asyncio.to_thread(migrate.downgrade, empty_database_url, "0035")

        assert await _policy_and_schedule_of(db, job_id) == (None, None)
        assert await db.fetchval("SELECT count(*) FROM jobs WHERE id = $1", orphan) == 0
        keys = await db.fetch(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'jobs'::regclass AND contype = 'f'"
        )
        assert {
            "fk_jobs_queue_id_queues",
            "fk_jobs_retry_policy_id_retry_policies",
            "fk_jobs_schedule_id_scheduled_jobs",
        } <= {k["conname"] for k in keys}
    finally:
        await db.close()


async def test_a_queue_is_deleted_only_under_read_committed(db: Conn) -> None:
    """Under a transaction snapshot the trigger's DELETE could miss a job enqueued after the
    snapshot; it refuses instead (the key's cascade raised a serialization failure then)."""
    queue_id = await make_queue(db)
    await make_job(db, queue_id)
    with pytest.raises(asyncpg.FeatureNotSupportedError, match="READ COMMITTED"):
        async with db.transaction(isolation="repeatable_read"):
            await db.execute("DELETE FROM queues WHERE id = $1", queue_id)
    assert await _jobs_of(db, queue_id) == 1
    # A delete that removes no queue has nothing to miss.
    async with db.transaction(isolation="repeatable_read"):
        await db.execute("DELETE FROM queues WHERE id = $1", uuid.uuid4())


# --- the row lock: an enqueue and a delete of its queue, at the same time ---------------------

# The insert trigger's check with its row lock taken out: the same refusal of a queue that is
# not there, but nothing holds the queue until the enqueue commits.
NO_LOCK = """
CREATE OR REPLACE FUNCTION codity_check_job_references() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM codity_inserted_jobs n
             WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.id = n.queue_id)) THEN
    PERFORM codity_missing_job_reference('fk_jobs_queue_id_queues', 'queue_id', 'queues', NULL);
  END IF;
  RETURN NULL;
END
$$
"""


async def _enqueue_while_the_queue_is_deleted(database_url: str, db: Conn) -> tuple[int, bool]:
    """An enqueue's transaction inserts a job (its statement done, not committed); meanwhile
    another transaction deletes the queue. Returns (jobs left with no queue, whether the delete
    waited for the enqueue)."""
    queue_id = await make_queue(db)
    enqueuer, deleter = await connect(database_url), await connect(database_url)
    try:
        tx = enqueuer.transaction()
        await tx.start()
        await core.enqueue_many(enqueuer, queue_id, [core.NewJob(handler="h")] * 3)
        delete = asyncio.ensure_future(
            deleter.execute("DELETE FROM queues WHERE id = $1", queue_id)
        )
        done, _ = await asyncio.wait({delete}, timeout=0.5)
        waited = not done
        await tx.commit()
        await delete
        orphans = await db.fetchval(
            "SELECT count(*) FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.id = j.queue_id)"
        )
        return int(orphans), waited
    finally:
        await enqueuer.close()
        await deleter.close()


async def test_a_queue_deleted_during_an_enqueue_takes_the_new_jobs_with_it(
    database_url: str, db: Conn
) -> None:
    orphans, waited = await _enqueue_while_the_queue_is_deleted(database_url, db)
    assert waited, "the delete did not wait for the enqueue's row lock on the queue"
    assert orphans == 0


async def test_break_it_without_the_row_lock_the_new_jobs_outlive_their_queue(
    database_url: str, db: Conn
) -> None:
    await db.execute(NO_LOCK)
    orphans, waited = await _enqueue_while_the_queue_is_deleted(database_url, db)
    assert not waited
    assert orphans == 3


async def test_an_enqueue_into_a_queue_being_deleted_fails_once_the_delete_commits(
    database_url: str, db: Conn
) -> None:
    queue_id = await make_queue(db)
    deleter, enqueuer = await connect(database_url), await connect(database_url)
    try:
        tx = deleter.transaction()
        await tx.start()
        await deleter.execute("DELETE FROM queues WHERE id = $1", queue_id)
        # The enqueue reads the queue (still there in its snapshot) and inserts; its check then
        # waits on the deleting transaction's row lock, and fails when that commits.
        enqueue = asyncio.ensure_future(make_job(enqueuer, queue_id))
        done, _ = await asyncio.wait({enqueue}, timeout=0.5)
        assert not done, "the enqueue's check did not wait for the delete"
        await tx.commit()
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await enqueue
        assert await _jobs_of(db, queue_id) == 0
    finally:
        await deleter.close()
        await enqueuer.close()
