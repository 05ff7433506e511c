"""`codity.client.AsyncClient`: the REST API from async code (httpx.AsyncClient).

The mirror of sync.py: the same resources and the same `Call` builders (_calls.py), awaited.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

import httpx

from codity.client import _calls as c
from codity.client import models as m
from codity.client._http import Call, Retries, auth_headers, finish

T = TypeVar("T")
Item = TypeVar("Item")


class _Page(Protocol[Item]):
    """Every `...Page` model: a page of items and the cursor of the next one."""

    items: list[Item]
    next_cursor: str | None


async def _pages(run: Callable[[str | None], Awaitable[_Page[T]]]) -> AsyncIterator[T]:
    cursor: str | None = None
    while True:
        page = await run(cursor)
        for item in page.items:
            yield item
        if not page.next_cursor:
            return
        cursor = page.next_cursor


class AsyncClient:
    """`AsyncClient(...)`, as `Client`; `async with`, or `await aclose()`. Lists are async
    iterators."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        project_id: c.Id | None = None,
        timeout_s: float = 10.0,
        retries: Retries | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=auth_headers(api_key, token),
            timeout=timeout_s,
            transport=transport,
        )
        self._retries = retries or Retries()
        self._sleep = sleep
        self.project_id = project_id
        self.jobs = Jobs(self)
        self.queues = Queues(self)
        self.dead_letters = DeadLetters(self)
        self.schedules = Schedules(self)
        self.workers = Workers(self)

    async def run(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            response = await self._http.send(call.request(self._http))
            delay = self._retries.delay(response, attempt)
            if delay is None:
                return finish(call, response)
            await response.aclose()
            await self._sleep(delay)
            attempt += 1

    async def overview(self) -> m.Overview:
        return await self.run(c.overview(self._project()))

    def _project(self) -> c.Id:
        if self.project_id is None:
            raise ValueError("this call needs Client(project_id=...)")
        return self.project_id

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Resource:
    def __init__(self, client: AsyncClient) -> None:
        self._c = client

    @property
    def _p(self) -> c.Id:
        return self._c._project()


class Jobs(_Resource):
    async def enqueue(self, job: m.JobCreate, *, idempotency_key: str | None = None) -> m.JobPublic:
        return await self._c.run(c.enqueue(self._p, job, idempotency_key))

    async def enqueue_many(self, jobs: m.JobsBulkCreate) -> m.JobsBulkResult:
        return await self._c.run(c.enqueue_many(self._p, jobs))

    async def get(self, job_id: int) -> m.JobDetail:
        return await self._c.run(c.get_job(self._p, job_id))

    def list(self, **filters: Any) -> AsyncIterator[m.JobPublic]:
        return _pages(lambda cur: self._c.run(c.list_jobs(self._p, cur, filters)))

    def logs(self, job_id: int, *, limit: int = 200) -> AsyncIterator[m.JobLogPublic]:
        return _pages(lambda cur: self._c.run(c.job_logs(self._p, job_id, cur, limit)))

    async def cancel(self, job_id: int) -> m.JobPublic:
        return await self._c.run(c.cancel_job(self._p, job_id))

    async def retry(self, job_id: int) -> m.JobPublic:
        return await self._c.run(c.retry_job(self._p, job_id))


class Queues(_Resource):
    def list(self, *, limit: int = 200) -> AsyncIterator[m.QueuePublic]:
        return _pages(lambda cur: self._c.run(c.list_queues(self._p, cur, limit)))

    async def get(self, queue_id: c.Id) -> m.QueuePublic:
        return await self._c.run(c.get_queue(self._p, queue_id))

    async def create(self, queue: m.QueueCreate) -> m.QueuePublic:
        return await self._c.run(c.create_queue(self._p, queue))

    async def pause(self, queue_id: c.Id) -> m.QueuePublic:
        return await self._c.run(c.pause_queue(self._p, queue_id))

    async def resume(self, queue_id: c.Id) -> m.QueuePublic:
        return await self._c.run(c.resume_queue(self._p, queue_id))

    async def delete(self, queue_id: c.Id) -> None:
        await self._c.run(c.delete_queue(self._p, queue_id))


class DeadLetters(_Resource):
    def list(self, **filters: Any) -> AsyncIterator[m.DeadLetterPublic]:
        return _pages(lambda cur: self._c.run(c.list_dead_letters(self._p, cur, filters)))

    async def replay(self, replay: m.DeadLetterReplay) -> m.ReplayResult:
        return await self._c.run(c.replay_dead_letters(self._p, replay))


class Schedules(_Resource):
    def list(self, *, limit: int = 200) -> AsyncIterator[m.SchedulePublic]:
        return _pages(lambda cur: self._c.run(c.list_schedules(self._p, cur, limit)))

    async def create(self, schedule: m.ScheduleCreate) -> m.SchedulePublic:
        return await self._c.run(c.create_schedule(self._p, schedule))

    async def trigger(self, schedule_id: c.Id) -> m.ScheduleTriggered:
        return await self._c.run(c.trigger_schedule(self._p, schedule_id))


class Workers(_Resource):
    def list(self, **filters: Any) -> AsyncIterator[m.WorkerPublic]:
        return _pages(lambda cur: self._c.run(c.list_workers(self._p, cur, filters)))
