"""`codity enqueue`: ids out, bad input as one line and a non-zero exit, ambiguity named."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue, make_tenant
from typer.testing import CliRunner

from codity.cli import app
from codity.settings import get_settings


async def invoke(cli: CliRunner, app_: Any, args: list[str]) -> Any:
    """The CLI calls asyncio.run(); run it off this test's event loop."""
    return await asyncio.to_thread(cli.invoke, app_, args)


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


async def test_enqueue_prints_ids_and_applies_options(
    cli: CliRunner, db: asyncpg.Connection[Any]
) -> None:
    tenant = await make_tenant(db)
    await make_queue(db, tenant.project_id, name="reports")
    result = await invoke(cli,
        app, ["enqueue", "reports", "report.generate", "--payload", '{"window_hours": 6}',
              "--count", "3", "--priority", "7", "--delay", "60"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    ids = [int(line) for line in result.output.split()]
    rows = await db.fetch(
        "SELECT id, handler, payload, priority, status::text, run_at > now() + interval '50 seconds' AS later FROM jobs ORDER BY id"
    )
    assert [r["id"] for r in rows] == ids
    for r in rows:
        assert (r["handler"], r["payload"], r["priority"], r["status"], r["later"]) == (
            "report.generate", {"window_hours": 6}, 7, "scheduled", True,
        )  # fmt: skip


async def test_concurrency_key_and_unique_for(cli: CliRunner, db: asyncpg.Connection[Any]) -> None:
    tenant = await make_tenant(db)
    await make_queue(db, tenant.project_id, name="sync")
    args = ["enqueue", "sync", "user.sync", "--payload", '{"user": 7}',
            "--concurrency-key", "user-7", "--unique-for", "60"]  # fmt: skip
    first = await invoke(cli, app, [*args, "--count", "2"])
    again = await invoke(cli, app, args)
    assert first.exit_code == 0, first.output
    assert again.exit_code == 0, again.output
    # One job: the repeat within the call and the later call both get it.
    (job_id,) = set(first.output.split()) | set(again.output.split())
    row = await db.fetchrow("SELECT id, concurrency_key, unique_key FROM jobs")
    assert (str(row["id"]), row["concurrency_key"]) == (job_id, "user-7")
    assert row["unique_key"].startswith("sha256:")


async def test_many_jobs_print_a_summary(cli: CliRunner, db: asyncpg.Connection[Any]) -> None:
    tenant = await make_tenant(db)
    await make_queue(db, tenant.project_id, name="bulk")
    result = await invoke(cli, app, ["enqueue", "bulk", "noop", "--count", "2500"])
    assert result.exit_code == 0, result.output
    assert "enqueued 2500 jobs on bulk" in result.output
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE status = 'queued'") == 2500


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["enqueue", "q1", "noop", "--payload", "{not json"], "--payload is not valid JSON"),
        (["enqueue", "nope", "noop"], "no queue named 'nope'"),
        (
            ["enqueue", "shared", "noop"],
            "queue 'shared' is ambiguous; pass --project with one of: ",
        ),
        (["enqueue", "q1", "noop", "--project", "ghost"], "no project 'ghost'"),
        (["enqueue", "q1", "noop", "--count", "0"], "Invalid value for '--count'"),
        (["enqueue", "q1", "noop", "--unique-for", "0"], "Invalid value for '--unique-for'"),
        (
            ["enqueue", "q1", "noop", "--concurrency-key", ""],
            "concurrency_key must be a string of 1 to 255 characters",
        ),
    ],
)
async def test_bad_input_is_one_line_and_a_non_zero_exit(
    cli: CliRunner, db: asyncpg.Connection[Any], args: list[str], message: str
) -> None:
    a, b = await make_tenant(db, "acme"), await make_tenant(db, "globex")
    await make_queue(db, a.project_id, name="q1")
    await make_queue(db, a.project_id, name="shared")
    await make_queue(db, b.project_id, name="shared")
    result = await invoke(cli, app, args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert await db.fetchval("SELECT count(*) FROM jobs") == 0
    if "ambiguous" in message:
        assert "acme/default" in result.output
        assert "globex/default" in result.output


async def test_project_picks_between_same_named_queues(
    cli: CliRunner, db: asyncpg.Connection[Any]
) -> None:
    a, b = await make_tenant(db, "acme"), await make_tenant(db, "globex")
    await make_queue(db, a.project_id, name="shared")
    theirs = await make_queue(db, b.project_id, name="shared")
    result = await invoke(cli, app, ["enqueue", "shared", "noop", "--project", "globex/default"])
    assert result.exit_code == 0, result.output
    assert await db.fetchval("SELECT queue_id FROM jobs") == theirs
