"""`codity.App`: where an application's tasks are registered and how it reaches the database.

    app = codity.App()            # DATABASE_URL and CODITY_PROJECT from the environment / .env
    app = codity.App("postgresql://...", project="acme/shop")

`project` (an id, a slug or "org/project") says in which project the tasks' queues are found;
an argument wins over the CODITY_PROJECT setting; with neither, a queue name must be unique in
the database. `codity worker --app mymodule:app`
runs the tasks of `app`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

import asyncpg

from codity import core
from codity.db.pool import create_pool
from codity.domain.errors import ConfigurationError, ValidationError
from codity.settings import get_settings
from codity.tasks.arguments import build_arguments
from codity.tasks.eager import EagerRunner
from codity.tasks.task import Task, TaskOptions
from codity.worker.context import JobContext
from codity.worker.registry import HandlerRegistry

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

#: Connections the App's own pool keeps per event loop (enqueue is one statement or two).
POOL_MAX_SIZE = 4
#: How long a pool's graceful close may take when its loop shuts down.
POOL_CLOSE_TIMEOUT_S = 5.0


class TaskDecorator(Protocol):
    """What `@app.task(...)` returns: a decorator that keeps the function's typed signature
    (without its leading JobContext, which the worker supplies)."""

    @overload
    def __call__(self, fn: Callable[Concatenate[JobContext, P], R]) -> Task[P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R]) -> Task[P, R]: ...


class App:
    def __init__(self, database_url: str | None = None, *, project: str | None = None) -> None:
        self._database_url = database_url
        self._project = project
        self.registry = HandlerRegistry()
        self.tasks: dict[str, Task[Any, Any]] = {}
        #: Set by `codity.testing.eager(app)`: enqueue runs the task inline, no database.
        self.eager = False
        self.eager_runner = EagerRunner()
        self._pools: dict[asyncio.AbstractEventLoop, asyncpg.Pool[Any]] = {}
        #: Per loop, the async generator that closes its pool when the loop shuts down.
        self._guards: dict[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = {}
        self._pool_lock = threading.Lock()
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._sync_thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<codity.App tasks={sorted(self.tasks)}>"

    @property
    def project(self) -> str | None:
        """The project the tasks' queues are looked up in: the argument, else CODITY_PROJECT."""
        return self._project or get_settings().codity_project

    @property
    def database_url(self) -> str:
        url = self._database_url or get_settings().database_url
        if not url:
            raise ConfigurationError(
                "codity.App has no database: pass App(database_url=...) or set DATABASE_URL"
            )
        return url

    # ---------------------------------------------------------------- registering tasks

    def task(
        self,
        *,
        queue: str = "default",
        name: str | None = None,
        max_attempts: int | None = None,
        timeout_s: float | None = None,
        priority: int | None = None,
        unique_for_s: float | None = None,
    ) -> TaskDecorator:
        """Register a function as a task. `name` defaults to the function's dotted path
        (`module.qualname`), which is what a job row's `handler` shows. `unique_for_s` makes
        every enqueue of it unique by default (same arguments within that many seconds, not
        finished yet: the existing job is returned)."""

        def decorate(fn: Callable[..., Any]) -> Task[Any, Any]:
            task_name = name or f"{fn.__module__}.{fn.__qualname__}"
            if task_name in self.tasks:
                raise ConfigurationError(f"two tasks are named {task_name!r}")
            defaults = TaskOptions(
                priority=priority,
                max_attempts=max_attempts,
                timeout_s=timeout_s,
                unique_for_s=unique_for_s,
            )
            _check_defaults(task_name, queue, defaults)
            task: Task[Any, Any] = Task(
                self,
                fn,
                name=task_name,
                queue=queue,
                defaults=defaults,
                arguments=build_arguments(fn, task_name),
            )
            self.registry.register(task_name, task.handler())
            self.tasks[task_name] = task
            return task

        return decorate

    # ---------------------------------------------------------------- connections

    async def pool(self) -> asyncpg.Pool[Any]:
        """The App's pool for the running event loop (asyncpg pools belong to one loop).

        A pool lives as long as its loop: it is closed when the loop shuts down (what
        `asyncio.run` does at its end: `shutdown_asyncgens` closes the guard made here, whose
        `finally` closes the pool while the loop still runs), so code that calls
        `asyncio.run(task.enqueue(...))` again and again holds no connection between calls.
        A loop closed without that shutdown (`loop.close()` after `run_until_complete`) cannot
        run the close any more: its pool is dropped when the next loop asks for one."""
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            self._forget_closed_loops()
            pool = await create_pool(
                self.database_url, min_size=1, max_size=POOL_MAX_SIZE, application_name="codity-app"
            )
            self._pools[loop] = pool
            guard = self._close_with_loop(loop, pool)
            await guard.asend(None)  # first iteration: the loop now finalises it at shutdown
            self._guards[loop] = guard
        return pool

    async def _close_with_loop(
        self, loop: asyncio.AbstractEventLoop, pool: asyncpg.Pool[Any]
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            if self._pools.get(loop) is pool:
                del self._pools[loop]
            self._guards.pop(loop, None)
            try:
                await asyncio.wait_for(pool.close(), POOL_CLOSE_TIMEOUT_S)
            except (TimeoutError, OSError, asyncpg.PostgresError):
                pool.terminate()

    def _forget_closed_loops(self) -> None:
        """Drop the pools of loops closed without shutting their async generators down."""
        for loop in [loop for loop in self._pools if loop.is_closed()]:
            self._pools.pop(loop, None)
            self._guards.pop(loop, None)

    async def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close `loop`'s pool (run on that loop)."""
        guard = self._guards.pop(loop, None)
        if guard is not None:
            await guard.aclose()  # its finally closes the pool
        pool = self._pools.pop(loop, None)
        if pool is not None:
            await pool.close()

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the App's background event loop and wait for it: how `enqueue_sync`
        without a connection of the caller's reaches the database from sync code."""
        loop = self._background_loop()
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
        return future.result()

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        with self._pool_lock:
            if self._sync_loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="codity-app-sync", daemon=True
                )
                thread.start()
                self._sync_loop, self._sync_thread = loop, thread
            return self._sync_loop

    async def aclose(self) -> None:
        """Close the pool of the running loop (and the background loop's, if any)."""
        await self._release(asyncio.get_running_loop())
        await asyncio.to_thread(self._close_background)

    def close(self) -> None:
        """Close the background loop used by sync enqueues. Async pools: `await aclose()`."""
        self._close_background()

    def _close_background(self) -> None:
        with self._pool_lock:
            loop, thread = self._sync_loop, self._sync_thread
            self._sync_loop = self._sync_thread = None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._release(loop), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def _check_defaults(name: str, queue: str, defaults: TaskOptions) -> None:
    """A bad default (max_attempts=0, a priority out of range, a negative timeout, ...) is
    refused when the task is declared, by the checks every enqueue makes, not at its first
    enqueue."""
    if not isinstance(queue, str) or not queue:
        raise ConfigurationError(f"task {name!r}: queue must be a queue's name")
    try:
        core.check_new_job(defaults.new_job(name, {}))
    except ValidationError as exc:
        raise ConfigurationError(f"task {name!r}: {exc.message}") from exc


def load_app(target: str) -> App | None:
    """`module:attribute` -> that App; `module` -> None (the module's `@handler`s register in
    the default registry as before)."""
    from codity.worker.registry import load_app as import_module

    module_name, _, attribute = target.partition(":")
    import_module(module_name)
    if not attribute:
        return None
    import sys

    module = sys.modules[module_name]
    app = getattr(module, attribute, None)
    if not isinstance(app, App):
        raise ConfigurationError(
            f"{target!r}: {module_name} has no codity.App named {attribute!r}"
            + (f" (found {type(app).__name__})" if app is not None else "")
        )
    return app
