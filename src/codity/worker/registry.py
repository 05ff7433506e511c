"""The handler registry: job handler names mapped to the functions that run them.

User code plugs in with `@handler("name")` in a module loaded by `codity worker --app module`,
or as tasks of a `codity.App` (`codity worker --app module:app`, see codity/tasks/), whose
registry the worker includes.
A handler takes one argument, the `JobContext`, and returns a JSON-serialisable result. It may
be `async def` (run on the worker's event loop) or a plain function (run in a thread pool so it
cannot block the loop).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from codity.domain.errors import ConfigurationError

if TYPE_CHECKING:
    from codity.worker.context import JobContext

HandlerFn = Callable[["JobContext"], Any]
F = TypeVar("F", bound=HandlerFn)


@dataclass(frozen=True)
class RegisteredHandler:
    name: str
    fn: HandlerFn
    is_async: bool


class HandlerRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, RegisteredHandler] = {}

    def register(self, name: str, fn: HandlerFn) -> None:
        existing = self._handlers.get(name)
        if existing is not None and existing.fn is not fn:
            raise ConfigurationError(
                f"two handlers are registered as {name!r}: "
                f"{_qualname(existing.fn)} and {_qualname(fn)}"
            )
        self._handlers[name] = RegisteredHandler(
            name=name, fn=fn, is_async=inspect.iscoroutinefunction(fn)
        )

    def handler(self, name: str) -> Callable[[F], F]:
        """Decorator: `@registry.handler("email.send")`."""
        if not name or not name.strip():
            raise ConfigurationError("a handler name must not be empty")

        def decorate(fn: F) -> F:
            self.register(name, fn)
            return fn

        return decorate

    def include(self, other: HandlerRegistry) -> None:
        """Register every handler of `other` here too (a codity.App's tasks in a worker)."""
        for registered in other._handlers.values():
            self.register(registered.name, registered.fn)

    def get(self, name: str) -> RegisteredHandler | None:
        return self._handlers.get(name)

    def names(self) -> list[str]:
        return sorted(self._handlers)


def _qualname(fn: HandlerFn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


#: The registry `@handler` writes to and `codity worker` reads from.
default_registry = HandlerRegistry()


def handler(name: str) -> Callable[[F], F]:
    """Register a job handler under `name` in the default registry."""
    return default_registry.handler(name)


def load_app(module_name: str) -> None:
    """Import a user module so its `@handler` decorators run.

    The current directory goes on `sys.path` first, as `python -m` and uvicorn do, so that
    `codity worker --app mypkg.jobs` finds a package next to where it is started.
    """
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import handler module {module_name!r}: {exc}") from exc
