"""The client's retry rule on 503 and 429 without a server: httpx's MockTransport answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from codity.client import Client, Retries, ServiceUnavailableError
from codity.client._http import retry_after_s


def test_503_is_retried_with_backoff_then_succeeds() -> None:
    answers = [httpx.Response(503), httpx.Response(503, headers={"Retry-After": "2"})]
    answers.append(httpx.Response(200, json={"items": [], "next_cursor": None}))
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Authorization"])
        return answers.pop(0)

    slept: list[float] = []
    with Client("http://api.test", token="t0k", project_id="p", sleep=slept.append,
                transport=httpx.MockTransport(handler),
                retries=Retries(max_retries=3, base_delay_s=0.5)) as api:  # fmt: skip
        assert list(api.queues.list()) == []
    assert seen == ["Bearer t0k"] * 3
    assert 0 <= slept[0] <= 0.5  # exponential backoff with full jitter, first step
    assert slept[1] == 2.0  # Retry-After honoured


def test_503_gives_up_after_the_retries_with_the_envelope() -> None:
    envelope = {"error": {"code": "database_unavailable", "message": "down", "request_id": "r1"}}
    transport = httpx.MockTransport(lambda _r: httpx.Response(503, json=envelope))
    api = Client("http://api.test", api_key="ck_x", project_id="p", sleep=lambda _s: None,
                 transport=transport, retries=Retries(max_retries=1))  # fmt: skip
    with api, pytest.raises(ServiceUnavailableError) as caught:
        api.overview()
    assert (caught.value.code, caught.value.request_id, caught.value.status) == (
        "database_unavailable", "r1", 503,
    )  # fmt: skip


def test_retry_after_as_an_http_date() -> None:
    later = datetime.now(UTC) + timedelta(seconds=30)
    assert 25 < (retry_after_s(format_datetime(later, usegmt=True)) or 0) <= 30
    assert retry_after_s("garbage") is None
