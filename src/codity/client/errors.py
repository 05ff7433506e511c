"""The API's error envelope, raised as typed exceptions (members of codity's one tree).

Every error answer is `{"error": {"code", "message", "details", "request_id"}}`; the client
raises the class for its HTTP status, carrying the envelope's fields. Catch `ApiError` for any
of them, or a subclass (`NotFoundError`, `RateLimitedError`, ...) for one kind.
"""

from __future__ import annotations

from typing import Any

import httpx

from codity.domain.errors import CodityError


class ApiError(CodityError):
    """An error answered by the API. `code` is the envelope's stable machine-readable code."""

    status: int = 0
    code = "api_error"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str,
        details: Any = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, details=details if isinstance(details, dict) else {})
        self.status = status
        self.code = code
        self.raw_details = details
        self.request_id = request_id

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class BadRequestError(ApiError):
    pass


class UnauthorizedError(ApiError):
    pass


class ForbiddenError(ApiError):
    pass


class NotFoundError(ApiError):
    pass


class ConflictError(ApiError):
    pass


class PayloadTooLargeError(ApiError):
    pass


class UnprocessableEntityError(ApiError):
    """Validation failed: `raw_details` lists the fields."""


class RateLimitedError(ApiError):
    """429 after the client's retries ran out (it honours Retry-After before giving up)."""


class ServerError(ApiError):
    pass


class ServiceUnavailableError(ServerError):
    """503 after the client's retries ran out."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitedError,
    503: ServiceUnavailableError,
}


def error_for(response: httpx.Response) -> ApiError:
    """The exception for an error response (envelope or not)."""
    status = response.status_code
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    try:
        body = response.json()["error"]
        return cls(
            str(body.get("message", "")),
            status=status,
            code=str(body.get("code", "")),
            details=body.get("details"),
            request_id=body.get("request_id"),
        )
    except (ValueError, KeyError, TypeError):
        text = response.text[:200]
        return cls(
            text or response.reason_phrase,
            status=status,
            code="http_error",
            request_id=response.headers.get("X-Request-ID"),
        )
