"""codity.client against a real `codity api` process: API-key and token auth, typed models,
paginated iterators (sync and async, over several pages), the error envelope as typed
exceptions, and 429 retried after exactly the server's Retry-After (sync and async clients)
until the retries run out."""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any

import asyncpg
import httpx
import pytest
from tests.acceptance.services.service_procs import Procs
from tests.accounts import sign_up
from tests.waiting import wait_for

from codity.client import (
    AsyncClient,
    Client,
    NotFoundError,
    RateLimitedError,
    Retries,
    UnauthorizedError,
    UnprocessableEntityError,
    models,
)

PASSWORD = "correct-horse-battery-staple"
#: No cap below the server's Retry-After (a window of 60 s): the wait must be the header's.
HONOURING = Retries(max_retries=2, max_delay_s=120)


class Recorder:
    """What went over the wire: each request's path, and the Retry-After of each 429."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.retry_after: list[float] = []

    def saw(self, request: httpx.Request, response: httpx.Response) -> None:
        self.paths.append(request.url.path)
        if response.status_code == 429:
            self.retry_after.append(float(response.headers["Retry-After"]))


class RecordingTransport(httpx.HTTPTransport):
    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.recorder.saw(request, response)
        return response


class AsyncRecordingTransport(httpx.AsyncHTTPTransport):
    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        self.recorder.saw(request, response)
        return response


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _start_api(procs: Procs, **env: str) -> str:
    port = _free_port()
    procs.spawn("api", "--port", str(port), env=env)
    base = f"http://127.0.0.1:{port}"

    async def ready() -> bool:
        try:
            async with httpx.AsyncClient() as http:
                return (await http.get(f"{base}/readyz", timeout=1)).status_code == 200
        except httpx.TransportError:
            return False

    await wait_for(ready, timeout_s=30, what="codity api to be ready")
    return base


async def _account(base: str, db: asyncpg.Connection[Any]) -> tuple[str, str, str]:
    """Sign up a user (org + default project) and make an API key: (token, project, key)."""
    async with httpx.AsyncClient(base_url=base + "/api/v1") as http:
        token, project = await sign_up(
            http, db, email=f"dev-{uuid.uuid4().hex[:8]}@codity.test", password=PASSWORD,
            name="Dev", org_name="Client Co", prefix="",
        )  # fmt: skip
        key = await http.post(f"/projects/{project}/api-keys", json={"name": "ci", "role": "admin"},
                              headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert key.status_code == 201, key.text
        return token, project, models.ApiKeyCreated.model_validate(key.json()).key


@pytest.mark.slow
async def test_the_client_against_a_real_api(procs: Procs, db: asyncpg.Connection[Any]) -> None:
    base = await _start_api(procs, RATE_LIMIT_ENQUEUE_PER_MINUTE="9")
    token, project, key = await _account(base, db)

    def sync_part() -> list[float]:
        with Client(base, api_key=key, project_id=project) as api:
            queue = api.queues.create(models.QueueCreate(name="emails"))
            assert queue.name == "emails"
            made = [
                api.jobs.enqueue(models.JobCreate(queue="emails", handler="h", payload={"i": i}))
                for i in range(5)
            ]
            assert all(isinstance(j, models.JobPublic) for j in made)
            same = api.jobs.enqueue(
                models.JobCreate(queue="emails", handler="h"), idempotency_key="k-1"
            )
            again = api.jobs.enqueue(
                models.JobCreate(queue="emails", handler="h"), idempotency_key="k-1"
            )
            assert again.id == same.id
            # limit 2: the iterator walks three pages to yield all six jobs, newest first.
            listed = [j.id for j in api.jobs.list(limit=2)]
            assert listed == sorted([j.id for j in made] + [same.id], reverse=True)
            detail = api.jobs.get(made[0].id)
            assert detail.payload == {"i": 0}
            assert api.jobs.cancel(made[0].id).status == models.JobStatus.cancelled

            with pytest.raises(NotFoundError) as missing:
                api.jobs.get(10**9)
            assert missing.value.code == "job_not_found"
            assert missing.value.request_id
            with pytest.raises(UnprocessableEntityError) as invalid:
                api.jobs.list(status="nonsense").__next__()
            assert invalid.value.status == 422

        # The enqueue quota is 9 a minute and 7 are spent: the third enqueue is refused with
        # 429 + Retry-After (the seconds left in the quota's window: tens of seconds); the
        # client waits exactly that (a recorded sleep here, so the test does not wait), retries,
        # and raises the envelope once its retries are used up.
        slept: list[float] = []
        wire = Recorder()
        with Client(base, api_key=key, project_id=project, sleep=slept.append,
                    retries=HONOURING, transport=RecordingTransport(wire)) as api:  # fmt: skip
            for _ in range(2):
                api.jobs.enqueue(models.JobCreate(queue="emails", handler="h"))
            with pytest.raises(RateLimitedError) as limited:
                api.jobs.enqueue(models.JobCreate(queue="emails", handler="h"))
            assert limited.value.code == "rate_limited"
        return slept, wire.retry_after

    slept, retry_after = await asyncio.to_thread(sync_part)
    # Three 429s (the first try and two retries), and the waits are the server's Retry-After
    # values: a jittered backoff (under 1 s for these attempts) cannot equal them.
    assert len(retry_after) == 3
    assert all(s >= 10 for s in retry_after), retry_after
    assert slept == retry_after[:2]

    # Token auth and the async client: its retries honour Retry-After the same way.
    async_slept: list[float] = []

    async def record_sleep(seconds: float) -> None:
        async_slept.append(seconds)

    async_wire = Recorder()
    async with AsyncClient(base, token=token, project_id=project, sleep=record_sleep,
                           retries=HONOURING,
                           transport=AsyncRecordingTransport(async_wire)) as api:  # fmt: skip
        with pytest.raises(RateLimitedError):
            await api.jobs.enqueue(models.JobCreate(queue="emails", handler="h"))
        assert len(async_wire.retry_after) == 3
        assert async_slept == async_wire.retry_after[:2]
        assert all(s >= 10 for s in async_slept), async_slept
        # Async iterators over pages: limit 2 over the 8 jobs is 4 pages, fetched as it goes.
        async_wire.paths.clear()
        listed = [j.id async for j in api.jobs.list(limit=2)]
        stored = [r["id"] for r in await db.fetch("SELECT id FROM jobs ORDER BY id DESC")]
        assert len(stored) == 8
        assert listed == stored
        assert async_wire.paths.count(f"/api/v1/projects/{project}/jobs") >= 4
        queues = [q.name async for q in api.queues.list(limit=1)]
        assert queues == ["emails"]
        jobs = [j async for j in api.jobs.list(limit=3, status="cancelled")]
        assert len(jobs) == 1
    async with AsyncClient(base, api_key="ck_not_a_real_key", project_id=project) as api:
        with pytest.raises(UnauthorizedError):
            await api.overview()
