"""codity.client against a real `codity api` process: API-key and token auth, typed models,
paginated iterators, the error envelope as typed exceptions, and 429 retried after
Retry-After until the retries run out."""

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
        # 429 + Retry-After; the client waits as told (a recorded sleep here), retries, and
        # raises the envelope once its retries are used up.
        slept: list[float] = []
        with Client(base, api_key=key, project_id=project, sleep=slept.append,
                    retries=Retries(max_retries=2)) as api:  # fmt: skip
            for _ in range(2):
                api.jobs.enqueue(models.JobCreate(queue="emails", handler="h"))
            with pytest.raises(RateLimitedError) as limited:
                api.jobs.enqueue(models.JobCreate(queue="emails", handler="h"))
            assert limited.value.code == "rate_limited"
        return slept

    slept = await asyncio.to_thread(sync_part)
    assert len(slept) == 2
    assert all(0 < s <= 60 for s in slept), slept  # the server's Retry-After, in seconds

    # Token auth and the async client, with an async iterator over pages.
    async with AsyncClient(base, token=token, project_id=project) as api:
        queues = [q.name async for q in api.queues.list(limit=1)]
        assert queues == ["emails"]
        jobs = [j async for j in api.jobs.list(limit=3, status="cancelled")]
        assert len(jobs) == 1
    async with AsyncClient(base, api_key="ck_not_a_real_key", project_id=project) as api:
        with pytest.raises(UnauthorizedError):
            await api.overview()
