"""What the sync and async clients share: requests as data, retries, decoding, pagination.

A resource method builds a `Call` (method, path, query, body, and how to read the answer);
`Client.run` / `AsyncClient.run` send it, retry 429 and 503 (honouring Retry-After, else
exponential backoff with jitter), raise the error envelope as a typed exception, and parse.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
import pydantic

from codity.client.errors import error_for

T = TypeVar("T")

API_PREFIX = "/api/v1"
#: Statuses that mean "not done, try again": rate limited, or the service is unavailable.
RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        params = {k: _param(v) for k, v in self.params.items() if v is not None}
        return client.build_request(
            self.method,
            API_PREFIX + self.path,
            params=params,
            json=self.body,
            headers=self.headers,
        )


def _param(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return value if isinstance(value, str | int | float) else str(value)


def model(cls: type[T]) -> Callable[[httpx.Response], T]:
    adapter = pydantic.TypeAdapter(cls)
    return lambda response: adapter.validate_json(response.content)


def nothing(_response: httpx.Response) -> None:
    return None


def body_of(value: pydantic.BaseModel) -> Any:
    return value.model_dump(mode="json", exclude_unset=True)


@dataclass(frozen=True)
class Retries:
    """429/503 are retried `max_retries` times: Retry-After when the server sends it (capped
    at `max_delay_s`), else `base_delay_s * 2**n` with full jitter."""

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before the next try, or None to give up and raise."""
        if response.status_code not in RETRY_STATUSES or attempt >= self.max_retries:
            return None
        after = retry_after_s(response.headers.get("Retry-After"))
        if after is not None:
            return min(after, self.max_delay_s)
        return random.uniform(0, min(self.max_delay_s, self.base_delay_s * 2**attempt))


def retry_after_s(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def finish(call: Call[T], response: httpx.Response) -> T:
    if response.is_error:
        raise error_for(response)
    return call.parse(response)


def auth_headers(api_key: str | None, token: str | None) -> dict[str, str]:
    if api_key and token:
        raise ValueError("give api_key or token, not both")
    secret = api_key or token
    return {"Authorization": f"Bearer {secret}"} if secret else {}
