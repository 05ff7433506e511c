"""Handlers from an external module run by a real `codity worker --app` process, the examples
under `examples/`: a bare module's `@handler`s (`--app hello_app.jobs`) and a `codity.App`'s
typed tasks (`--app shop.tasks:app`, the module:attribute form) run, log and report progress,
visible in `job_logs` and on the job row; an attribute that is not a codity.App is refused."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import asyncpg
import pytest
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateTable
from tests.acceptance.services.service_procs import (
    REPO,
    Procs,
    exit_code,
    wait_for,
    wait_workers,
)
from tests.factories import make_project, make_queue, make_tenant

from codity import core

EXAMPLES = REPO / "examples"

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


def _shop() -> tuple[Any, Any]:
    """The shop example's modules, imported as its README runs them (from examples/)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module("shop.tasks"), importlib.import_module("shop.web")


async def test_a_codity_app_named_module_colon_attribute_runs_its_typed_tasks(
    procs: Procs, db: asyncpg.Connection[Any]
) -> None:
    tasks, web = _shop()
    tenant = await make_tenant(db, slug="shop")
    project = await make_project(db, tenant.org_id, "web")  # the App's project="shop/web"
    await make_queue(db, project, name="emails")
    for table in web.Base.metadata.sorted_tables:
        await db.execute(str(CreateTable(table).compile(dialect=postgresql.dialect())))
    order_id = await db.fetchval(
        "INSERT INTO shop_orders (email, total_cents) VALUES ('ada@example.com', 1250) RETURNING id"
    )
    procs.spawn("worker", "--app", "shop.tasks:app", "--queues", "emails", cwd=EXAMPLES)
    await wait_workers(db, 1)
    job = await tasks.send_order_confirmation.using(db).enqueue(
        order_id=order_id, email="ada@example.com"
    )

    async def done() -> bool:
        status = await db.fetchval("SELECT status::text FROM jobs WHERE id = $1", job.id)
        return status == "completed"

    await wait_for(done, what="the task run by `codity worker --app shop.tasks:app`")
    row = await db.fetchrow("SELECT handler, result, progress FROM jobs WHERE id = $1", job.id)
    assert row["handler"] == "shop.tasks.send_order_confirmation"
    assert (row["result"], row["progress"]) == ({"order_id": order_id}, 100)
    assert [tuple(r) for r in await db.fetch("SELECT order_id, recipient FROM shop_emails")] == [
        (order_id, "ada@example.com")
    ]
    logged = await db.fetchrow("SELECT message, fields FROM job_logs WHERE job_id = $1", job.id)
    assert logged["message"] == "sending order confirmation"
    assert logged["fields"] == {"order_id": order_id, "attempt": 1}


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "shop.tasks:nothing",
            "'shop.tasks:nothing': shop.tasks has no codity.App named 'nothing'",
        ),
        ("shop.tasks:send_order_confirmation", "named 'send_order_confirmation' (found Task)"),
        ("shop.nowhere:app", "cannot import handler module 'shop.nowhere'"),
    ],
)
def test_an_app_that_is_not_a_codity_app_is_refused_clearly(
    procs: Procs, target: str, message: str
) -> None:
    proc = procs.spawn("worker", "--app", target, cwd=EXAMPLES)
    assert exit_code(proc, 30) not in (None, 0)
    logs = procs.logs(proc)
    assert message in logs, logs
    assert "Traceback" not in logs
