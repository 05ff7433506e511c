"""What every command shares: settings, the database URL, and one-line errors instead of tracebacks."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, NoReturn, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from codity.db.cluster import database_url_or_embedded
from codity.domain.errors import CodityError
from codity.settings import Settings, get_settings

console = Console()
err_console = Console(stderr=True)

P = ParamSpec("P")
T = TypeVar("T")


def fail(message: str, code: int = 1) -> NoReturn:
    # escape(): a message is data, not markup; "[database_unavailable]" or a "[/]" in a server
    # error would otherwise be swallowed as a style tag or crash rich with a MarkupError.
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def friendly_errors(fn: Callable[P, T]) -> Callable[P, T]:
    """Turn the errors a user can cause into one clear line and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except CodityError as exc:
            fail(f"{exc.message} [{exc.code}]")
        except ValueError as exc:  # pydantic settings validation, bad option values
            fail(str(exc).splitlines()[0] if str(exc) else repr(exc))
        except KeyboardInterrupt:
            raise typer.Exit(130) from None

    return wrapper


def settings() -> Settings:
    try:
        return get_settings()
    except ValueError as exc:
        fail(f"invalid configuration: {exc}")


@contextlib.contextmanager
def database_url() -> Iterator[str]:
    """The configured DATABASE_URL, or the embedded server started for this command."""
    with database_url_or_embedded(settings().database_url) as url:
        yield url


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)
