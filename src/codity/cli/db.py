"""`codity db ...`: schema and data management."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import asyncpg
import typer
from rich.table import Table

from codity.cli._common import console, database_url, fail, friendly_errors, run, settings
from codity.db import migrate as migrations
from codity.db.dsn import redact
from codity.db.maintenance import Resumed, drop_everything, resume_all
from codity.db.pool import connect
from codity.devtools import explain as explain_harness
from codity.devtools.seed import (
    DEMO_PASSWORD,
    OPERATOR_EMAIL,
    VIEWER_EMAIL,
    seed_demo,
    table_counts,
)

app = typer.Typer(help="Migrate, reset, seed and inspect the database.", no_args_is_help=True)

APPLICATION_NAME = "codity-cli"


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """A statement the server refuses (permissions, a locked object...) becomes one line."""
    try:
        yield
    except asyncpg.UndefinedTableError as exc:
        fail(f"the schema is missing or out of date ({exc}); run `codity db migrate` first")
    except Exception as exc:
        # SQLAlchemy's errors (from alembic) are matched by module, not imported: importing
        # SQLAlchemy here would cost every `codity` command a second of start-up.
        if not isinstance(exc, asyncpg.PostgresError) and not type(exc).__module__.startswith(
            "sqlalchemy."
        ):
            raise
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        fail(f"the database refused the operation: {type(exc).__name__}: {first_line}")


async def _check_reachable(url: str) -> None:
    conn = await connect(url, application_name=APPLICATION_NAME)
    await conn.close()


async def _drop_everything(url: str) -> None:
    conn = await connect(url, application_name=APPLICATION_NAME)
    try:
        await drop_everything(conn)
    finally:
        await conn.close()


async def _seed(url: str) -> tuple[dict[str, int], Resumed]:
    conn = await connect(url, application_name=APPLICATION_NAME)
    try:
        await seed_demo(conn)
        resumed = await resume_all(conn)  # the seed pauses nothing; this is the guarantee
        return await table_counts(conn), resumed
    finally:
        await conn.close()


async def _resume(url: str) -> Resumed:
    conn = await connect(url, application_name=APPLICATION_NAME)
    try:
        return await resume_all(conn)
    finally:
        await conn.close()


def _reset(url: str) -> None:
    run(_drop_everything(url))
    migrations.upgrade(url)


@app.command("migrate")
@friendly_errors
def migrate_command() -> None:
    """Upgrade the schema to the latest migration."""
    with database_url() as url, _refusals():
        run(_check_reachable(url))
        migrations.upgrade(url)
        console.print(f"[green]migrated[/] {redact(url)} to {migrations.head_revision()}")


@app.command("reset")
@friendly_errors
def reset_command(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Drop every table and type (all data!), then migrate to the latest schema."""
    with database_url() as url, _refusals():
        run(_check_reachable(url))
        if not yes and not typer.confirm(
            f"This deletes ALL data in {redact(url)}. Continue?", default=False
        ):
            fail("reset cancelled; nothing was changed")
        _reset(url)
        console.print(
            f"[green]reset[/] {redact(url)}: empty schema at {migrations.head_revision()}"
        )


@app.command("demo")
@friendly_errors
def demo_command() -> None:
    """Reset the database and load the demo data (migrate, reset, seed, nothing paused)."""
    if settings().environment == "production":
        # It drops every table, then creates accounts whose password is in the README.
        fail(
            "codity db demo is refused with CODITY_ENV=production: it deletes all data and "
            "creates demo accounts with a published password"
        )
    with database_url() as url, _refusals():
        run(_check_reachable(url))
        _reset(url)
        counts, _ = run(_seed(url))
    console.print(f"[green]demo data loaded[/] into {redact(url)}", soft_wrap=True)
    table = Table("table", "rows")
    for name, count in counts.items():
        if count:
            table.add_row(name, str(count))
    console.print(table)
    console.print(
        f"sign in as [bold]{OPERATOR_EMAIL}[/] (owner) or [bold]{VIEWER_EMAIL}[/] (viewer), "
        f"password [bold]{DEMO_PASSWORD}[/]"
    )


@app.command("resume")
@friendly_errors
def resume_command() -> None:
    """Un-pause every queue and enable every schedule."""
    with database_url() as url, _refusals():
        resumed = run(_resume(url))
    console.print(
        f"[green]resumed[/] {resumed.queues} paused queue(s) and "
        f"{resumed.schedules} disabled schedule(s)"
    )


@app.command("explain")
@friendly_errors
def explain_command(
    rows: Annotated[
        int, typer.Option(min=1000, help="Jobs to fill the scratch database with.")
    ] = explain_harness.DEFAULT_ROWS,
    runs: Annotated[
        int, typer.Option(min=1, help="Measured runs per configuration (median kept).")
    ] = explain_harness.DEFAULT_RUNS,
    output: Annotated[Path, typer.Option(help="Where to write the report.")] = Path(
        "docs/EXPLAIN.md"
    ),
) -> None:
    """Measure the claim's plan on a filled scratch database and write docs/EXPLAIN.md."""
    with database_url() as url, _refusals():
        run(_check_reachable(url))
        console.print(f"filling a scratch database on {redact(url)} with {rows:,} jobs...")
        report = run(explain_harness.run_explain(url, rows=rows, runs=runs))
    output.parent.mkdir(parents=True, exist_ok=True)
    explain_harness.write_report(report, output)
    table = Table("configuration", "median select", "penalty", "select plan")
    base = report.measurements[0].median_ms
    for m in report.measurements:
        table.add_row(
            m.configuration.name, f"{m.median_ms:.3f} ms", f"{m.median_ms / base:.1f}x", m.shape
        )
    console.print(table)
    console.print(f"[green]wrote[/] {output}")
