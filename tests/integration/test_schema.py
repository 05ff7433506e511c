"""The schema's promises, checked on a real server: every test here fails if its mechanism goes.

Rows are inserted with plain SQL (the factories) so these tests depend on the schema only.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import CheckConstraint, UniqueConstraint
from sqlalchemy.dialects.postgresql import DOMAIN
from tests.factories import (
    make_dead_letter,
    make_execution,
    make_job,
    make_job_log,
    make_queue,
    make_retry_policy,
    make_schedule,
    make_tenant,
    make_worker,
)

from codity.db.tables import MAX_PAYLOAD_BYTES, metadata
from codity.domain.states import ALLOWED_TRANSITIONS, JobStatus

Conn = asyncpg.Connection  # the `db` fixture: asyncpg with jsonb decoded to Python values


async def _job(db: Conn, queue_id: uuid.UUID, **fields: Any) -> int:
    return await make_job(db, queue_id, handler="noop", **fields)


async def _execution(
    db: Conn, job_id: int, queue_id: uuid.UUID, seq: int, worker_id: uuid.UUID | None
) -> None:
    await make_execution(
        db, job_id, queue_id, status="failed", execution_seq=seq, attempt=seq, worker_id=worker_id
    )


def _payload_of_size(size: int) -> dict[str, str]:
    """A JSON object whose text form (as jsonb prints it) is exactly `size` bytes."""
    overhead = len(json.dumps({"blob": ""}, separators=(", ", ": ")))
    payload = {"blob": "x" * (size - overhead)}
    assert len(json.dumps(payload, separators=(", ", ": ")).encode()) == size
    return payload


# --- payload cap ----------------------------------------------------------------------------


async def test_payload_at_the_cap_is_accepted_and_65_kb_is_rejected(db: Conn) -> None:
    queue_id = await make_queue(db)
    job_id = await _job(db, queue_id, payload=_payload_of_size(MAX_PAYLOAD_BYTES))
    stored = await db.fetchval("SELECT octet_length(payload::text) FROM jobs WHERE id = $1", job_id)
    assert stored == MAX_PAYLOAD_BYTES

    with pytest.raises(asyncpg.CheckViolationError) as caught:
        await _job(db, queue_id, payload=_payload_of_size(65 * 1024 + 1))
    assert caught.value.constraint_name == "ck_jobs_payload_size"
    assert await db.fetchval("SELECT count(*) FROM jobs") == 1


@pytest.mark.parametrize("table", ["scheduled_jobs", "dead_letter_jobs"])
async def test_other_payload_columns_are_capped_too(db: Conn, table: str) -> None:
    queue_id = await make_queue(db)
    big = _payload_of_size(MAX_PAYLOAD_BYTES + 1)
    insert = {
        "scheduled_jobs": lambda: make_schedule(
            db, queue_id, payload=big, next_run_at=datetime.now(UTC)
        ),
        "dead_letter_jobs": lambda: make_dead_letter(db, queue_id, payload=big),
    }[table]
    with pytest.raises(asyncpg.CheckViolationError) as caught:
        await insert()
    assert caught.value.constraint_name == f"ck_{table}_payload_size"


async def test_writing_a_payload_over_the_cap_is_refused(db: Conn) -> None:
    queue_id = await make_queue(db)
    job_id = await _job(db, queue_id, payload={"small": True})
    with pytest.raises(asyncpg.CheckViolationError) as caught:
        await db.execute(
            "UPDATE jobs SET payload = $2 WHERE id = $1",
            job_id,
            _payload_of_size(MAX_PAYLOAD_BYTES + 1),
        )
    assert caught.value.constraint_name == "ck_jobs_payload_size"
    assert await db.fetchval("SELECT payload FROM jobs WHERE id = $1", job_id) == {"small": True}


#: A 100-byte payload, and a cap of 20 bytes added without checking the rows already stored:
#: what a status change re-checks then shows.
_STORED = {"blob": "x" * 88}
_TIGHT_CAP = "CHECK (octet_length({}::text) <= 20) NOT VALID"


async def _run_through_a_claim_and_a_completion(db: Conn, job_id: int) -> None:
    worker_id = await make_worker(db)
    await db.execute(
        """UPDATE jobs SET status = 'claimed', worker_id = $2, claimed_at = now(),
                  lock_expires_at = now() + interval '1 minute', attempt = attempt + 1,
                  execution_seq = execution_seq + 1
           WHERE id = $1""",
        job_id,
        worker_id,
    )
    await db.execute(
        """UPDATE jobs SET status = 'completed', finished_at = now(), lock_expires_at = NULL
           WHERE id = $1""",
        job_id,
    )


async def test_a_status_change_does_not_check_the_payload_again(db: Conn) -> None:
    """The payload cap is a domain's check (migration 0033): it runs where a statement writes the
    payload, not on every transition of the row, which re-printed the whole payload as JSON text
    for every claim and completion. With the cap tightened below a payload already stored, the
    job still goes through claimed and completed; writing a payload is still checked."""
    queue_id = await make_queue(db)
    job_id = await _job(db, queue_id, payload=_STORED)
    await db.execute(
        "ALTER DOMAIN jobs_payload DROP CONSTRAINT ck_jobs_payload_size;"
        " ALTER DOMAIN jobs_payload ADD CONSTRAINT ck_jobs_payload_size "
        + _TIGHT_CAP.format("VALUE")
    )
    await _run_through_a_claim_and_a_completion(db, job_id)
    assert await db.fetchval("SELECT status::text FROM jobs WHERE id = $1", job_id) == "completed"
    with pytest.raises(asyncpg.CheckViolationError) as caught:
        await db.execute("UPDATE jobs SET payload = $2 WHERE id = $1", job_id, _STORED)
    assert caught.value.constraint_name == "ck_jobs_payload_size"


async def test_break_it_a_table_check_on_the_payload_runs_on_every_transition(db: Conn) -> None:
    """The twin: the same cap as a table CHECK (as before migration 0033) is evaluated by the
    claim's UPDATE, which never sets the payload."""
    queue_id = await make_queue(db)
    job_id = await _job(db, queue_id, payload=_STORED)
    await db.execute(
        "ALTER TABLE jobs ADD CONSTRAINT ck_jobs_payload_tight " + _TIGHT_CAP.format("payload")
    )
    with pytest.raises(asyncpg.CheckViolationError) as caught:
        await _run_through_a_claim_and_a_completion(db, job_id)
    assert caught.value.constraint_name == "ck_jobs_payload_tight"


# --- uniqueness -----------------------------------------------------------------------------


async def test_idempotency_key_is_unique_per_queue_not_globally(db: Conn) -> None:
    tenant = await make_tenant(db)
    emails = await make_queue(db, tenant.project_id, name="emails")
    reports = await make_queue(db, tenant.project_id, name="reports")
    await _job(db, emails, idempotency_key="order-42")

    with pytest.raises(asyncpg.UniqueViolationError) as caught:
        await _job(db, emails, idempotency_key="order-42")
    assert caught.value.constraint_name == "uq_jobs_queue_id_idempotency_key"

    await _job(db, reports, idempotency_key="order-42")  # another queue: allowed
    await _job(db, emails)  # no key: never conflicts
    await _job(db, emails)
    assert await db.fetchval("SELECT count(*) FROM jobs") == 4


async def test_execution_seq_is_unique_per_job(db: Conn) -> None:
    queue_id = await make_queue(db)
    job_id = await _job(db, queue_id)
    await _execution(db, job_id, queue_id, 1, None)
    with pytest.raises(asyncpg.UniqueViolationError) as caught:
        await _execution(db, job_id, queue_id, 1, None)
    assert caught.value.constraint_name == "pk_job_executions"  # the attempt is the key


# --- foreign keys: cascade down ownership, SET NULL on references ---------------------------


async def test_deleting_a_worker_keeps_its_jobs_and_executions(db: Conn) -> None:
    queue_id = await make_queue(db)
    worker_id = await make_worker(db)
    job_id = await _job(db, queue_id, status="completed", attempt=1, worker_id=worker_id)
    await _execution(db, job_id, queue_id, 1, worker_id)

    await db.execute("DELETE FROM workers WHERE id = $1", worker_id)

    job = await db.fetchrow("SELECT status::text, worker_id FROM jobs WHERE id = $1", job_id)
    assert job is not None
    assert (job["status"], job["worker_id"]) == ("completed", None)
    executions = await db.fetch("SELECT worker_id FROM job_executions WHERE job_id = $1", job_id)
    assert [e["worker_id"] for e in executions] == [None]


async def test_a_worker_holding_a_lease_cannot_be_deleted_out_from_under_it(db: Conn) -> None:
    """SET NULL would leave a running job without an owner; the CHECK refuses, the reaper first."""
    queue_id = await make_queue(db)
    worker_id = await make_worker(db)
    await _job(db, queue_id, status="running", attempt=1, worker_id=worker_id, leased=True)
    with pytest.raises(asyncpg.CheckViolationError) as caught:
        await db.execute("DELETE FROM workers WHERE id = $1", worker_id)
    assert caught.value.constraint_name == "ck_jobs_leased_has_owner"


async def test_deleting_a_project_cascades_to_everything_it_owns(db: Conn) -> None:
    tenant = await make_tenant(db)
    other = await make_tenant(db)
    policy_id = await make_retry_policy(db, tenant.project_id)
    queue_id = await make_queue(db, tenant.project_id, retry_policy_id=policy_id)
    other_queue = await make_queue(db, other.project_id)
    job_id = await _job(db, queue_id, status="dead_letter", attempt=3)
    await _execution(db, job_id, queue_id, 1, None)
    await make_schedule(db, queue_id, name="every-minute", next_run_at=datetime.now(UTC))
    await make_dead_letter(db, queue_id, job_id=job_id)
    await make_job_log(db, job_id)
    await _job(db, other_queue)

    await db.execute("DELETE FROM projects WHERE id = $1", tenant.project_id)

    leftovers = {
        "queues": ("SELECT count(*) FROM queues WHERE id = $1", queue_id),
        "jobs": ("SELECT count(*) FROM jobs WHERE queue_id = $1", queue_id),
        "job_executions": ("SELECT count(*) FROM job_executions WHERE job_id = $1", job_id),
        "job_logs": ("SELECT count(*) FROM job_logs WHERE job_id = $1", job_id),
        "scheduled_jobs": ("SELECT count(*) FROM scheduled_jobs WHERE queue_id = $1", queue_id),
        "dead_letter_jobs": ("SELECT count(*) FROM dead_letter_jobs WHERE queue_id = $1", queue_id),
        "retry_policies": (
            "SELECT count(*) FROM retry_policies WHERE project_id = $1",
            tenant.project_id,
        ),
    }
    for table, (query, arg) in leftovers.items():
        assert await db.fetchval(query, arg) == 0, f"{table} kept rows of the deleted project"
    # The other tenant is untouched.
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE queue_id = $1", other_queue) == 1


async def test_a_dead_letter_survives_purging_its_job(db: Conn) -> None:
    queue_id = await make_queue(db)
    payload = {"to": "ada@example.com", "template": "receipt"}
    job_id = await _job(db, queue_id, status="dead_letter", attempt=3, payload=payload)
    dl_id = await make_dead_letter(
        db, queue_id, job_id=job_id, payload=payload, error="SMTP 554 rejected", attempts=3
    )

    await db.execute("DELETE FROM jobs WHERE id = $1", job_id)

    row = await db.fetchrow(
        "SELECT job_id, payload, error, attempts FROM dead_letter_jobs WHERE id = $1", dl_id
    )
    assert row is not None
    assert row["job_id"] is None
    assert row["payload"] == payload
    assert (row["error"], row["attempts"]) == ("SMTP 554 rejected", 3)


# --- row CHECKs -----------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["claimed", "running"])
async def test_a_leased_job_must_name_its_worker_and_lease(db: Conn, status: str) -> None:
    queue_id = await make_queue(db)
    worker_id = await make_worker(db)
    for worker, leased in ((None, True), (worker_id, False), (None, False)):
        with pytest.raises(asyncpg.CheckViolationError) as caught:
            await _job(db, queue_id, status=status, attempt=1, worker_id=worker, leased=leased)
        assert caught.value.constraint_name == "ck_jobs_leased_has_owner"
    await _job(db, queue_id, status=status, attempt=1, worker_id=worker_id, leased=True)


@pytest.mark.parametrize(("attempt", "max_attempts"), [(-1, 3), (4, 3)])
async def test_attempt_stays_within_0_and_max_attempts(
    db: Conn, attempt: int, max_attempts: int
) -> None:
    queue_id = await make_queue(db)
    with pytest.raises(asyncpg.CheckViolationError) as caught:
        await _job(db, queue_id, attempt=attempt, max_attempts=max_attempts)
    assert caught.value.constraint_name == "ck_jobs_attempt_range"
    await _job(db, queue_id, attempt=max_attempts, max_attempts=max_attempts)


# --- the lifecycle trigger ------------------------------------------------------------------


async def test_the_trigger_refuses_completed_to_running(db: Conn) -> None:
    queue_id = await make_queue(db)
    worker_id = await make_worker(db)
    job_id = await _job(db, queue_id, status="completed", attempt=1)
    with pytest.raises(asyncpg.CheckViolationError, match="illegal job transition"):
        await db.execute(
            """UPDATE jobs SET status = 'running', worker_id = $2,
                               lock_expires_at = now() + interval '30 seconds'
               WHERE id = $1""",
            job_id,
            worker_id,
        )
    assert await db.fetchval("SELECT status::text FROM jobs WHERE id = $1", job_id) == "completed"


async def test_the_trigger_and_the_python_map_agree_edge_for_edge(db: Conn) -> None:
    """Every (from, to) pair: the database allows exactly the edges ALLOWED_TRANSITIONS lists."""
    queue_id = await make_queue(db)
    worker_id = await make_worker(db)
    disagreements: list[str] = []
    for current in JobStatus:
        leased = current in (JobStatus.CLAIMED, JobStatus.RUNNING)
        job_id = await _job(
            db,
            queue_id,
            status=current.value,
            attempt=1,
            worker_id=worker_id if leased else None,
            leased=leased,
        )
        for target in JobStatus:
            if target == current:
                continue
            allowed_in_db = True
            try:
                async with db.transaction():
                    await db.execute(
                        """UPDATE jobs SET status = $2, worker_id = $3,
                                          lock_expires_at = now() + interval '30 seconds'
                           WHERE id = $1""",
                        job_id,
                        target.value,
                        worker_id,
                    )
                    raise _Rollback
            except _Rollback:
                pass
            except asyncpg.CheckViolationError:
                allowed_in_db = False
            if allowed_in_db != (target in ALLOWED_TRANSITIONS[current]):
                disagreements.append(f"{current} -> {target}: database allows={allowed_in_db}")
    assert disagreements == []


class _Rollback(Exception):
    """Raised inside a transaction block only to roll it back."""


# --- what tables.py promises ----------------------------------------------------------------


async def test_the_schema_has_the_promised_shape(db: Conn) -> None:
    tables = {
        r["tablename"]
        for r in await db.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    }
    assert tables == set(metadata.tables) | {"alembic_version"}
    assert len(metadata.tables) >= 15

    enums = {
        r["typname"]: r["labels"]
        for r in await db.fetch(
            """SELECT t.typname, array_agg(e.enumlabel ORDER BY e.enumsortorder) AS labels
               FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid
               JOIN pg_namespace n ON n.oid = t.typnamespace
               WHERE n.nspname = 'public' GROUP BY t.typname"""
        )
    }
    assert set(enums) == {
        "job_status",
        "member_role",
        "backoff_strategy",
        "worker_status",
        "execution_status",
    }
    assert enums["job_status"] == [s.value for s in JobStatus]

    claim_index = await db.fetchval(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'jobs' AND indexname = 'idx_jobs_claim'"
    )
    assert claim_index == (
        "CREATE INDEX idx_jobs_claim ON public.jobs USING btree "
        "(queue_id, priority DESC, run_at, id) WHERE (status = 'queued'::job_status)"
    )

    fillfactor = await db.fetchval("SELECT reloptions FROM pg_class WHERE relname = 'jobs'")
    assert "fillfactor=80" in fillfactor


def test_database_doc_summary_matches_tables_py() -> None:
    """docs/DATABASE.md states the schema's counts; recompute them so the doc cannot drift."""
    tables = metadata.tables.values()
    fks = [fk for t in tables for fk in t.foreign_keys]
    indexes = [i for t in tables for i in t.indexes]
    partial = [i for i in indexes if i.dialect_options["postgresql"].get("where") is not None]
    checks = [c for t in tables for c in t.constraints if isinstance(c, CheckConstraint)]
    uniques = [c for t in tables for c in t.constraints if isinstance(c, UniqueConstraint)]
    enums = {c.type.name for t in tables for c in t.columns if hasattr(c.type, "enums")}
    domains = {c.type.name for t in tables for c in t.columns if isinstance(c.type, DOMAIN)}
    summary = (
        f"{len(tables)} tables · {len(enums)} native enums · {len(indexes)} secondary indexes "
        f"({len(partial)} partial) · {len(fks)} foreign keys "
        f"({sum(fk.ondelete == 'CASCADE' for fk in fks)} CASCADE, "
        f"{sum(fk.ondelete == 'SET NULL' for fk in fks)} SET NULL) · {len(checks)} CHECKs · "
        f"{len(domains)} checked domains · {len(uniques)} UNIQUE constraints"
    )
    doc = Path(__file__).resolve().parents[2] / "docs" / "DATABASE.md"
    assert summary in doc.read_text(), f"update the summary line of docs/DATABASE.md to: {summary}"
