"""The `codity` command line. Each command group lives in a module of its own."""

from __future__ import annotations

import typer

from codity.cli import api as api_commands
from codity.cli import bench as bench_commands
from codity.cli import db as db_commands
from codity.cli import enqueue as enqueue_commands
from codity.cli import scheduler as scheduler_commands
from codity.cli import up as up_commands
from codity.cli import web as web_commands
from codity.cli import worker as worker_commands

app = typer.Typer(
    name="codity",
    help="Codity Scheduler: a distributed job scheduler on PostgreSQL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(db_commands.app, name="db")
app.add_typer(bench_commands.app, name="bench")
app.command("worker")(worker_commands.worker_command)
app.command("scheduler")(scheduler_commands.scheduler_command)
app.command("enqueue")(enqueue_commands.enqueue_command)
app.command("up")(up_commands.up_command)
app.command("web")(web_commands.web)
app.command("api")(api_commands.api_command)


def main() -> None:
    app()
