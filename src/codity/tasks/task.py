"""A task: a typed function registered on an `App`, enqueued by calling `.enqueue(...)`.

    @app.task(queue="emails", max_attempts=5)
    async def send_welcome(user_id: int) -> None: ...

    await send_welcome.enqueue(user_id=42)                      # the App's own pool
    send_welcome.enqueue_sync(user_id=42)                       # from sync code
    await send_welcome.using(session).enqueue(user_id=42)       # in the caller's transaction
    await send_welcome.options(delay_s=60, idempotency_key="w-42").enqueue(user_id=42)
    await send_welcome.options(unique_for_s=3600, concurrency_key="user-42").enqueue(user_id=42)
    await send_welcome.enqueue_many([{"user_id": 1}, {"user_id": 2}])

`options()` and `using()` return a `TaskCall`: an immutable description of how to enqueue,
with the same methods. Calling the task itself calls the function directly.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar
from uuid import UUID

from codity import core
from codity.domain.errors import ConfigurationError, ValidationError
from codity.domain.states import JobStatus
from codity.tasks.arguments import Arguments
from codity.worker.context import JobContext

if TYPE_CHECKING:
    from codity.tasks.app import App

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class TaskOptions:
    """Per-task defaults and per-call options; None = the queue's (or task's) default."""

    priority: int | None = None
    max_attempts: int | None = None
    timeout_s: float | None = None
    delay_s: float | None = None
    run_at: datetime | None = None
    idempotency_key: str | None = None
    depends_on: Sequence[int] = ()
    batch_id: UUID | None = None
    # Flow control (docs/CONCURRENCY.md): a concurrency key, and unique jobs.
    concurrency_key: str | None = None
    unique_for_s: float | None = None
    unique_key: str | None = None
    unique_states: Sequence[JobStatus | str] | None = None

    def merged(self, other: TaskOptions) -> TaskOptions:
        """`other`'s options where it sets them, ours elsewhere."""
        changes = {
            name: value for name, value in vars(other).items() if value is not None and value != ()
        }
        return replace(self, **changes)

    def new_job(self, handler: str, payload: Any) -> core.NewJob:
        timeout_ms = None
        if self.timeout_s is not None:
            if (
                isinstance(self.timeout_s, bool)
                or not isinstance(self.timeout_s, int | float)
                or not math.isfinite(self.timeout_s)
                or self.timeout_s <= 0
            ):
                raise ValidationError(
                    f"timeout_s must be a positive number of seconds, got {self.timeout_s!r}"
                )
            timeout_ms = max(1, round(self.timeout_s * 1000))
        return core.NewJob(
            handler=handler,
            payload=payload,
            priority=self.priority if self.priority is not None else 0,
            run_at=self.run_at,
            delay_s=self.delay_s,
            idempotency_key=self.idempotency_key,
            batch_id=self.batch_id,
            depends_on=tuple(self.depends_on),
            timeout_ms=timeout_ms,
            max_attempts=self.max_attempts,
            concurrency_key=self.concurrency_key,
            unique_for_s=self.unique_for_s,
            unique_key=self.unique_key,
            unique_states=self.unique_states,
        )


@dataclass(frozen=True)
class TaskCall(Generic[P, R]):
    """How to enqueue a task: on which connection (None = the App's pool) with which options."""

    task: Task[P, R]
    conn: Any = None
    opts: TaskOptions = field(default_factory=TaskOptions)

    def options(
        self,
        *,
        priority: int | None = None,
        max_attempts: int | None = None,
        timeout_s: float | None = None,
        delay_s: float | None = None,
        run_at: datetime | None = None,
        idempotency_key: str | None = None,
        depends_on: Sequence[int] = (),
        batch_id: UUID | None = None,
        concurrency_key: str | None = None,
        unique_for_s: float | None = None,
        unique_key: str | None = None,
        unique_states: Sequence[JobStatus | str] | None = None,
    ) -> TaskCall[P, R]:
        more = TaskOptions(
            priority=priority,
            max_attempts=max_attempts,
            timeout_s=timeout_s,
            delay_s=delay_s,
            run_at=run_at,
            idempotency_key=idempotency_key,
            depends_on=depends_on,
            batch_id=batch_id,
            concurrency_key=concurrency_key,
            unique_for_s=unique_for_s,
            unique_key=unique_key,
            unique_states=unique_states,
        )
        return replace(self, opts=self.opts.merged(more))

    def using(self, conn: Any) -> TaskCall[P, R]:
        """Enqueue on the caller's connection or session, inside its transaction: asyncpg,
        psycopg 3 (async or sync) or SQLAlchemy (async or sync)."""
        return replace(self, conn=conn)

    def job(self, *args: P.args, **kwargs: P.kwargs) -> core.NewJob:
        """The job this call would enqueue, validated (for `enqueue_many` with per-job
        options: `[t.options(idempotency_key=k).job(x) for ...]`)."""
        payload = self.task.arguments.payload(args, kwargs)
        return self.task.defaults.merged(self.opts).new_job(self.task.name, payload)

    def _jobs(self, items: Sequence[Mapping[str, Any] | core.NewJob]) -> list[core.NewJob]:
        jobs = []
        for item in items:
            if isinstance(item, core.NewJob):
                if item.handler != self.task.name:
                    raise ValidationError(
                        f"{self.task.name}.enqueue_many got a job for {item.handler!r}"
                    )
                jobs.append(item)
            elif isinstance(item, Mapping):
                jobs.append(self.job(**item))  # type: ignore[call-arg]
            else:
                raise ValidationError(
                    "enqueue_many takes mappings of arguments or jobs made with .job(...)"
                )
        return jobs

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> core.EnqueuedJob:
        (made,) = await self._enqueue([self.job(*args, **kwargs)])
        return made

    async def enqueue_many(
        self, items: Sequence[Mapping[str, Any] | core.NewJob]
    ) -> list[core.EnqueuedJob]:
        return await self._enqueue(self._jobs(items))

    def enqueue_sync(self, *args: P.args, **kwargs: P.kwargs) -> core.EnqueuedJob:
        (made,) = self._enqueue_sync([self.job(*args, **kwargs)])
        return made

    def enqueue_many_sync(
        self, items: Sequence[Mapping[str, Any] | core.NewJob]
    ) -> list[core.EnqueuedJob]:
        return self._enqueue_sync(self._jobs(items))

    async def _enqueue(self, jobs: list[core.NewJob]) -> list[core.EnqueuedJob]:
        app = self.task.app
        if app.eager:
            return await app.eager_runner.run_async(self.task, jobs)
        conn = self.conn if self.conn is not None else await app.pool()
        return await core.enqueue_many(conn, self.task.queue_ref, jobs)

    def _enqueue_sync(self, jobs: list[core.NewJob]) -> list[core.EnqueuedJob]:
        app = self.task.app
        if app.eager:
            return app.eager_runner.run_sync(self.task, jobs)
        if self.conn is None:
            return app.run_sync(self._enqueue(jobs))
        return core.enqueue_many_sync(self.conn, self.task.queue_ref, jobs)


class Task(Generic[P, R]):
    """A function registered as a job handler. Call it to run it here; enqueue it to run it
    on a worker. The enqueue methods are those of `TaskCall`, with no connection or option."""

    def __init__(
        self,
        app: App,
        fn: Callable[..., R],
        *,
        name: str,
        queue: str,
        defaults: TaskOptions,
        arguments: Arguments,
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.queue = queue
        self.defaults = defaults
        self.arguments = arguments
        self.is_async = inspect.iscoroutinefunction(fn)
        self.__name__ = getattr(fn, "__name__", name)
        self.__doc__ = fn.__doc__
        self._call: TaskCall[P, R] = TaskCall(self)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.arguments.context_param is not None:
            raise ConfigurationError(
                f"{self.name} takes a JobContext: run it through a worker or codity.testing"
            )
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Task {self.name} on queue {self.queue!r}>"

    @property
    def queue_ref(self) -> core.QueueRef:
        return core.QueueRef(name=self.queue, project=self.app.project)

    # -- enqueueing: see TaskCall ------------------------------------------------------------

    def options(
        self,
        *,
        priority: int | None = None,
        max_attempts: int | None = None,
        timeout_s: float | None = None,
        delay_s: float | None = None,
        run_at: datetime | None = None,
        idempotency_key: str | None = None,
        depends_on: Sequence[int] = (),
        batch_id: UUID | None = None,
        concurrency_key: str | None = None,
        unique_for_s: float | None = None,
        unique_key: str | None = None,
        unique_states: Sequence[JobStatus | str] | None = None,
    ) -> TaskCall[P, R]:
        return self._call.options(
            priority=priority,
            max_attempts=max_attempts,
            timeout_s=timeout_s,
            delay_s=delay_s,
            run_at=run_at,
            idempotency_key=idempotency_key,
            depends_on=depends_on,
            batch_id=batch_id,
            concurrency_key=concurrency_key,
            unique_for_s=unique_for_s,
            unique_key=unique_key,
            unique_states=unique_states,
        )

    def using(self, conn: Any) -> TaskCall[P, R]:
        return self._call.using(conn)

    def job(self, *args: P.args, **kwargs: P.kwargs) -> core.NewJob:
        return self._call.job(*args, **kwargs)

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> core.EnqueuedJob:
        return await self._call.enqueue(*args, **kwargs)

    def enqueue_sync(self, *args: P.args, **kwargs: P.kwargs) -> core.EnqueuedJob:
        return self._call.enqueue_sync(*args, **kwargs)

    async def enqueue_many(
        self, items: Sequence[Mapping[str, Any] | core.NewJob]
    ) -> list[core.EnqueuedJob]:
        return await self._call.enqueue_many(items)

    def enqueue_many_sync(
        self, items: Sequence[Mapping[str, Any] | core.NewJob]
    ) -> list[core.EnqueuedJob]:
        return self._call.enqueue_many_sync(items)

    # -- running (the worker's handler, and eager mode) ------------------------------------

    def handler(self) -> Callable[[JobContext], Any]:
        """The registry handler: payload -> validated arguments -> the function."""
        arguments, fn = self.arguments, self.fn
        if self.is_async:

            async def run_async(ctx: JobContext) -> Any:
                return await fn(**arguments.call_arguments(ctx.payload, ctx))  # type: ignore[misc]

            run_async.__qualname__ = run_async.__name__ = self.name
            return run_async

        def run(ctx: JobContext) -> Any:
            return fn(**arguments.call_arguments(ctx.payload, ctx))

        run.__qualname__ = run.__name__ = self.name
        return run
