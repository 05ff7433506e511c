"""`codity db ...` as a user runs it: a real process, a real server, real output.

Each command runs as `python -m codity` in a temporary working directory, so the state it keeps
under `.codity/` (dev secrets, the embedded cluster) never lands in the repository.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue, make_schedule, make_tenant
from typer.testing import CliRunner

from codity.cli import app
from codity.db.cluster import embedded_cluster
from codity.db.migrate import head_revision
from codity.db.pool import connect
from codity.devtools.seed import (
    DEMO_PASSWORD,
    OPERATOR_EMAIL,
    VIEWER_EMAIL,
    build_demo_jobs,
    table_counts,
)
from codity.domain.passwords import verify_password
from codity.settings import get_settings

COMMAND_TIMEOUT_S = 90
#: Nothing listens on port 1: the connection is refused at once.
UNREACHABLE_URL = "postgresql://codity:secret@127.0.0.1:1/codity"


def codity(
    *args: str, cwd: Path, database_url: str | None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "TEST_DATABASE_URL") and not k.startswith("PYTEST")
    }
    env.update({"CODITY_ENV": "test", "HOME": str(cwd), "COLUMNS": "200"})
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "-m", "codity", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A short path under /tmp: pgserver's Unix socket path must stay under ~100 characters."""
    path = Path(tempfile.mkdtemp(prefix="cdy-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def assert_demo_data(conn: asyncpg.Connection[Any]) -> dict[str, int]:
    """What the demo promises, read back from the database; returns the counts per table."""
    users = {
        r["email"]: r
        for r in await conn.fetch(
            """SELECT u.email, u.password_hash, m.role::text AS role, o.slug
               FROM users u JOIN memberships m ON m.user_id = u.id
               JOIN organizations o ON o.id = m.org_id"""
        )
    }
    assert users[OPERATOR_EMAIL]["role"] == "owner"
    assert users[VIEWER_EMAIL]["role"] == "viewer"
    assert {u["slug"] for u in users.values()} == {"codity-demo"}
    assert verify_password(users[OPERATOR_EMAIL]["password_hash"], DEMO_PASSWORD)

    queues = {
        r["name"]: r
        for r in await conn.fetch(
            """SELECT q.name, q.is_paused, q.concurrency_limit, p.strategy::text AS strategy
               FROM queues q JOIN retry_policies p ON p.id = q.retry_policy_id"""
        )
    }
    assert {name: q["strategy"] for name, q in queues.items()} == {
        "emails": "fixed",
        "reports": "linear",
        "webhooks": "exponential",
    }
    assert not any(q["is_paused"] for q in queues.values())
    assert queues["webhooks"]["concurrency_limit"] == 5

    schedule = await conn.fetchrow(
        # The next minute boundary after seeding: relative to the row's own creation time, not
        # to now() (the check may run after that minute has passed on a slow machine).
        "SELECT cron_expression, timezone, handler, enabled, "
        "next_run_at > created_at AND next_run_at <= created_at + interval '1 minute' AS due_later "
        "FROM scheduled_jobs"
    )
    assert schedule is not None
    assert dict(schedule) == {
        "cron_expression": "* * * * *",
        "timezone": "UTC",
        "handler": "report.generate",
        "enabled": True,
        "due_later": True,
    }

    # Retry history: jobs that failed at least once and then completed, one row per attempt.
    retried = await conn.fetch(
        """SELECT j.id, array_agg(e.status::text ORDER BY e.execution_seq) AS statuses
           FROM jobs j JOIN job_executions e ON e.job_id = j.id
           WHERE j.status = 'completed' GROUP BY j.id HAVING count(*) > 1"""
    )
    assert retried
    for row in retried:
        assert row["statuses"][-1] == "completed"
        assert set(row["statuses"][:-1]) == {"failed"}

    # Dead letters: a copy of payload and reason, every attempt recorded as failed.
    dead = await conn.fetch(
        """SELECT d.payload, d.error, d.attempts, j.handler, j.payload AS job_payload,
                  j.max_attempts, (SELECT count(*) FROM job_executions e
                                   WHERE e.job_id = j.id AND e.status = 'failed') AS failures
           FROM dead_letter_jobs d JOIN jobs j ON j.id = d.job_id AND j.status = 'dead_letter'"""
    )
    assert dead
    for row in dead:
        assert row["handler"] == "noop"
        assert row["payload"] == row["job_payload"] != {}
        assert row["error"]
        assert row["attempts"] == row["max_attempts"] == row["failures"]

    # Throughput history: completed executions spread over the last hour.
    spread = await conn.fetchval(
        """SELECT count(DISTINCT date_trunc('minute', finished_at)) FROM job_executions
           WHERE status = 'completed' AND finished_at > now() - interval '1 hour'"""
    )
    assert spread >= 30
    statuses = {
        r["status"]: r["n"]
        for r in await conn.fetch("SELECT status::text, count(*) AS n FROM jobs GROUP BY 1")
    }
    assert statuses["queued"] > 0
    assert statuses["scheduled"] > 0
    assert sum(statuses.values()) == len(build_demo_jobs(await conn.fetchval("SELECT now()")))
    return await table_counts(conn)


def test_migrate_against_an_unreachable_database_prints_one_line(workdir: Path) -> None:
    result = codity("db", "migrate", cwd=workdir, database_url=UNREACHABLE_URL)

    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "cannot connect to PostgreSQL" in lines[0]
    assert "[database_unavailable]" in lines[0]
    assert "secret" not in result.stderr + result.stdout  # the password is redacted
    assert "Traceback" not in result.stderr + result.stdout


def test_a_broken_embedded_data_directory_is_one_line(workdir: Path) -> None:
    data_dir = workdir / ".codity" / "pgdata"
    data_dir.mkdir(parents=True)
    (data_dir / "PG_VERSION").write_text("not a cluster\n")

    result = codity("db", "migrate", cwd=workdir, database_url=None)

    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "cannot start the embedded PostgreSQL" in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


async def test_demo_twice_against_database_url_gives_the_same_data(
    database_url: str, workdir: Path
) -> None:
    counts = []
    for _ in range(2):
        result = codity("db", "demo", cwd=workdir, database_url=database_url)
        assert result.returncode == 0, result.stderr
        assert OPERATOR_EMAIL in result.stdout
        conn = await connect(database_url)
        try:
            counts.append(await assert_demo_data(conn))
        finally:
            await conn.close()
    assert counts[0] == counts[1]
    assert counts[0]["jobs"] > 0


@pytest.fixture
def cli_in_process(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    """The same `codity` app run in this process (no interpreter start-up) on this test's DB.

    For command logic (prompts, counts); the process-level guarantees above use subprocesses.
    """
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


async def _with_conn(url: str, use: Callable[[Any], Awaitable[Any]]) -> Any:
    conn = await connect(url)
    try:
        return await use(conn)
    finally:
        await conn.close()


def _sql(url: str, statement: str, *args: Any) -> Any:
    return asyncio.run(_with_conn(url, lambda conn: conn.fetchval(statement, *args)))


def test_reset_asks_first_and_changes_nothing_when_refused(
    cli_in_process: CliRunner, database_url: str
) -> None:
    asyncio.run(_with_conn(database_url, lambda conn: make_tenant(conn, "keep")))

    refused = cli_in_process.invoke(app, ["db", "reset"], input="n\n")
    assert refused.exit_code != 0
    assert "nothing was changed" in refused.stderr
    assert _sql(database_url, "SELECT count(*) FROM organizations") == 1

    done = cli_in_process.invoke(app, ["db", "reset", "--yes"])
    assert done.exit_code == 0, done.output
    assert _sql(database_url, "SELECT count(*) FROM organizations") == 0
    assert _sql(database_url, "SELECT version_num FROM alembic_version") == head_revision()


def test_resume_unpauses_every_queue_and_enables_every_schedule(
    cli_in_process: CliRunner, database_url: str
) -> None:
    async def setup() -> None:
        conn = await connect(database_url)
        try:
            tenant = await make_tenant(conn)
            for paused in (True, True, False):
                await make_queue(conn, tenant.project_id, is_paused=paused)
            queue_id = await make_queue(conn, tenant.project_id)
            await make_schedule(
                conn, queue_id, name="off", enabled=False, next_run_at=datetime.now(UTC)
            )
        finally:
            await conn.close()

    asyncio.run(setup())

    result = cli_in_process.invoke(app, ["db", "resume"])

    assert result.exit_code == 0, result.output
    assert "resumed 2 paused queue(s) and 1 disabled schedule(s)" in result.stdout
    assert _sql(database_url, "SELECT count(*) FROM queues WHERE is_paused") == 0
    assert _sql(database_url, "SELECT count(*) FROM scheduled_jobs WHERE NOT enabled") == 0


@pytest.mark.slow
async def test_demo_on_the_embedded_server_leaves_the_data_and_stops_it(workdir: Path) -> None:
    result = codity("db", "demo", cwd=workdir, database_url=None)
    assert result.returncode == 0, result.stderr

    data_dir = workdir / ".codity" / "pgdata"
    assert (data_dir / "PG_VERSION").exists()
    assert not (data_dir / "postmaster.pid").exists(), "the embedded server was left running"

    with embedded_cluster(data_dir) as cluster:
        conn = await connect(cluster.url)
        try:
            counts = await assert_demo_data(conn)
        finally:
            await conn.close()
    assert counts["users"] == 2
    assert not (data_dir / "postmaster.pid").exists()
