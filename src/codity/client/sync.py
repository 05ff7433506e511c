"""`codity.client.Client`: the REST API from sync code (httpx.Client)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
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


def _pages(run: Callable[[str | None], _Page[T]]) -> Iterator[T]:
    cursor: str | None = None
    while True:
        page = run(cursor)
        yield from page.items
        if not page.next_cursor:
            return
        cursor = page.next_cursor


class Client:
    """`Client("http://localhost:3000", api_key="ck_...", project_id=...)`; use as a context
    manager or call `close()`. Lists are iterators that fetch the next page as they go."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        project_id: c.Id | None = None,
        timeout_s: float = 10.0,
        retries: Retries | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._http = httpx.Client(
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

    def run(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            response = self._http.send(call.request(self._http))
            delay = self._retries.delay(response, attempt)
            if delay is None:
                return finish(call, response)
            response.close()
            self._sleep(delay)
            attempt += 1

    def overview(self) -> m.Overview:
        return self.run(c.overview(self._project()))

    def _project(self) -> c.Id:
        if self.project_id is None:
            raise ValueError("this call needs Client(project_id=...)")
        return self.project_id

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Resource:
    def __init__(self, client: Client) -> None:
        self._c = client

    @property
    def _p(self) -> c.Id:
        return self._c._project()


class Jobs(_Resource):
    def enqueue(self, job: m.JobCreate, *, idempotency_key: str | None = None) -> m.JobPublic:
        return self._c.run(c.enqueue(self._p, job, idempotency_key))

    def enqueue_many(self, jobs: m.JobsBulkCreate) -> m.JobsBulkResult:
        return self._c.run(c.enqueue_many(self._p, jobs))

    def get(self, job_id: int) -> m.JobDetail:
        return self._c.run(c.get_job(self._p, job_id))

    def list(self, **filters: Any) -> Iterator[m.JobPublic]:
        return _pages(lambda cur: self._c.run(c.list_jobs(self._p, cur, filters)))

    def logs(self, job_id: int, *, limit: int = 200) -> Iterator[m.JobLogPublic]:
        return _pages(lambda cur: self._c.run(c.job_logs(self._p, job_id, cur, limit)))

    def cancel(self, job_id: int) -> m.JobPublic:
        return self._c.run(c.cancel_job(self._p, job_id))

    def retry(self, job_id: int) -> m.JobPublic:
        return self._c.run(c.retry_job(self._p, job_id))


class Queues(_Resource):
    def list(self, *, limit: int = 200) -> Iterator[m.QueuePublic]:
        return _pages(lambda cur: self._c.run(c.list_queues(self._p, cur, limit)))

    def get(self, queue_id: c.Id) -> m.QueuePublic:
        return self._c.run(c.get_queue(self._p, queue_id))

    def create(self, queue: m.QueueCreate) -> m.QueuePublic:
        return self._c.run(c.create_queue(self._p, queue))

    def pause(self, queue_id: c.Id) -> m.QueuePublic:
        return self._c.run(c.pause_queue(self._p, queue_id))

    def resume(self, queue_id: c.Id) -> m.QueuePublic:
        return self._c.run(c.resume_queue(self._p, queue_id))

    def delete(self, queue_id: c.Id) -> None:
        self._c.run(c.delete_queue(self._p, queue_id))


class DeadLetters(_Resource):
    def list(self, **filters: Any) -> Iterator[m.DeadLetterPublic]:
        return _pages(lambda cur: self._c.run(c.list_dead_letters(self._p, cur, filters)))

    def replay(self, replay: m.DeadLetterReplay) -> m.ReplayResult:
        return self._c.run(c.replay_dead_letters(self._p, replay))


class Schedules(_Resource):
    def list(self, *, limit: int = 200) -> Iterator[m.SchedulePublic]:
        return _pages(lambda cur: self._c.run(c.list_schedules(self._p, cur, limit)))

    def create(self, schedule: m.ScheduleCreate) -> m.SchedulePublic:
        return self._c.run(c.create_schedule(self._p, schedule))

    def trigger(self, schedule_id: c.Id) -> m.ScheduleTriggered:
        return self._c.run(c.trigger_schedule(self._p, schedule_id))


class Workers(_Resource):
    def list(self, **filters: Any) -> Iterator[m.WorkerPublic]:
        return _pages(lambda cur: self._c.run(c.list_workers(self._p, cur, filters)))
