"""`codity db ...`: schema and data management."""

from __future__ import annotations

import typer

from codity.cli._common import console, database_url, friendly_errors, run
from codity.db import migrate as migrations
from codity.db.dsn import redact
from codity.db.pool import connect

app = typer.Typer(help="Migrate, reset, seed and inspect the database.", no_args_is_help=True)


async def _check_reachable(url: str) -> None:
    conn = await connect(url, application_name="codity-cli")
    await conn.close()


@app.command("migrate")
@friendly_errors
def migrate_command() -> None:
    """Upgrade the schema to the latest migration."""
    with database_url() as url:
        run(_check_reachable(url))
        migrations.upgrade(url)
        console.print(f"[green]migrated[/] {redact(url)} to {migrations.head_revision()}")
