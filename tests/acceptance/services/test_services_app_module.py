"""A handler from an external module (`codity worker --app`), the one under `examples/`, runs,
logs and reports progress, visible in `job_logs` and on the job row."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from tests.acceptance.services.service_procs import REPO, Procs, wait_for, wait_workers
from tests.factories import make_queue, make_tenant

from codity import core

pytestmark = pytest.mark.slow


async def test_the_example_app_runs_logs_and_reports_progress(
    procs: Procs, db: asyncpg.Connection[Any]
) -> None:
    tenant = await make_tenant(db)
    queue_id = await make_queue(db, tenant.project_id, name="emails")
    procs.spawn("worker", "--app", "hello_app.jobs", "--queues", "emails", cwd=REPO / "examples")
    await wait_workers(db, 1)
    greet = await core.enqueue(
        db, queue_id, core.NewJob(handler="hello.greet", payload={"name": "Ada"})
    )
    count = await core.enqueue(
        db, queue_id, core.NewJob(handler="hello.count_words", payload={"text": "one two three"})
    )

    async def both_done() -> bool:
        n = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'completed'",
            [greet.id, count.id],
        )
        return n == 2

    await wait_for(both_done, what="the example handlers")
    row = await db.fetchrow(
        "SELECT result, progress, progress_message FROM jobs WHERE id = $1", greet.id
    )
    assert row["result"] == {"greeting": "Hello, Ada!", "job_id": greet.id, "attempt": 1}
    assert (row["progress"], row["progress_message"]) == (100, "done")
    assert await db.fetchval("SELECT result FROM jobs WHERE id = $1", count.id) == {"words": 3}
    assert await db.fetchval("SELECT progress FROM jobs WHERE id = $1", count.id) == 100

    logs = await db.fetch(
        "SELECT job_id, execution_seq, level, message, fields FROM job_logs ORDER BY id"
    )
    by_job = {r["job_id"]: r for r in logs}
    assert by_job[greet.id]["message"] == "composing a greeting"
    assert by_job[greet.id]["fields"] == {"name_length": 3, "attempt": 1}
    assert (by_job[greet.id]["level"], by_job[greet.id]["execution_seq"]) == ("info", 1)
    assert by_job[count.id]["message"] == "counting words"
