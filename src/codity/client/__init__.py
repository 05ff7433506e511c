"""The REST API from Python: `Client` (sync) and `AsyncClient`, over httpx.

    from codity.client import Client, models

    with Client("http://localhost:3000", api_key="ck_...", project_id=project) as api:
        job = api.jobs.enqueue(models.JobCreate(queue="emails", handler="email.send",
                                                payload={"to": "a@example.com"}))
        for failed in api.jobs.list(status="failed"):
            ...

Authentication: an API key (`api_key=`) or a user's access token (`token=`). 429 and 503
answers are retried with backoff, honouring Retry-After; other errors raise the API's error
envelope as typed exceptions (`codity.client.errors`). `models` is generated from the OpenAPI
document (`make api-clients`), so request and response types follow the API.
"""

from __future__ import annotations

from codity.client import errors, models
from codity.client._http import Retries
from codity.client.aio import AsyncClient
from codity.client.errors import (
    ApiError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    ServerError,
    ServiceUnavailableError,
    UnauthorizedError,
    UnprocessableEntityError,
)
from codity.client.sync import Client

__all__ = [
    "ApiError",
    "AsyncClient",
    "BadRequestError",
    "Client",
    "ConflictError",
    "ForbiddenError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "Retries",
    "ServerError",
    "ServiceUnavailableError",
    "UnauthorizedError",
    "UnprocessableEntityError",
    "errors",
    "models",
]
