"""One error envelope for every error the API answers.

`{"error": {"code", "message", "details", "request_id"}}`: `code` is stable and machine
readable (the `code` of the `codity.domain.errors` class that was raised, or one of the HTTP
codes below), `message` is for a person, `details` is structured (field paths for validation
errors) and `request_id` matches the `X-Request-ID` response header and the log lines.

The errors themselves are one tree, documented in one place: `codity.domain.errors`; this
module maps each family to its HTTP status. A 500 never carries a stack trace: the middleware
logs it with the request id and answers `internal_error` (see `middleware.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg
import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from codity.api.request_context import REQUEST_ID_HEADER, current_request_id
from codity.db.reconnect import is_transient
from codity.domain import errors as domain

log = structlog.get_logger("codity.api")


class ErrorBody(BaseModel):
    code: str
    message: str
    details: Any = None
    request_id: str


class ErrorEnvelope(BaseModel):
    error: ErrorBody


#: HTTP status for each domain error family; the most specific class is matched first.
_STATUS_BY_CLASS: Sequence[tuple[type[domain.CodityError], int]] = (
    (domain.UnauthorizedError, 401),
    (domain.ForbiddenError, 403),
    (domain.RateLimitedError, 429),
    (domain.PayloadTooLargeError, 413),
    (domain.ValidationError, 422),
    (domain.NotFoundError, 404),
    (domain.ConflictError, 409),  # includes IllegalTransitionError and LeaseLostError
    (domain.DatabaseUnavailableError, 503),
    (domain.ConfigurationError, 500),
)

#: Codes for errors raised as plain HTTPException (by Starlette routing or FastAPI itself).
_CODE_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}


def status_for(exc: domain.CodityError) -> int:
    for cls, status in _STATUS_BY_CLASS:
        if isinstance(exc, cls):
            return status
    return 400


def error_response(
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    request_id = current_request_id()
    body = ErrorEnvelope(
        error=ErrorBody(code=code, message=message, details=details, request_id=request_id)
    )
    all_headers = {REQUEST_ID_HEADER: request_id, **(headers or {})}
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=all_headers)


async def _codity_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, domain.CodityError)
    status = status_for(exc)
    headers = None
    if isinstance(exc, domain.RateLimitedError):
        headers = {"Retry-After": str(exc.retry_after_s)}
    if status >= 500:
        log.error("request_failed", code=exc.code, message=exc.message)
    return error_response(status, exc.code, exc.message, exc.details or None, headers)


def _field_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Each problem as {loc, msg, type}: never the offending input (it may be a secret)."""
    return [
        {
            "loc": [str(p) if not isinstance(p, int) else p for p in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in exc.errors()
    ]


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = _field_errors(exc)
    if any(d["type"] == "json_invalid" for d in details):
        message = "the request body is not valid JSON"
    else:
        fields = ", ".join(".".join(str(p) for p in d["loc"]) for d in details[:5])
        message = f"the request is not valid: {fields}"
    return error_response(422, "validation_error", message, details)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _CODE_BY_STATUS.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, code, message, None, headers)


async def _integrity_error(_: Request, exc: Exception) -> JSONResponse:
    """A constraint the handler did not anticipate: a client error, not a 500.

    Handlers translate the constraints they expect into specific codes; this is the net under
    them. Only the constraint's name is reported, never the row's values.
    """
    assert isinstance(exc, asyncpg.PostgresError)
    constraint = getattr(exc, "constraint_name", None)
    if isinstance(exc, asyncpg.UniqueViolationError):
        return error_response(
            409,
            "conflict",
            "a resource with these values already exists",
            {"constraint": constraint},
        )
    if isinstance(exc, asyncpg.ForeignKeyViolationError):
        return error_response(
            409,
            "conflict",
            "a referenced resource does not exist or is in use",
            {"constraint": constraint},
        )
    return error_response(
        422, "validation_error", "a value is out of the allowed range", {"constraint": constraint}
    )


async def _database_unavailable(_: Request, exc: Exception) -> JSONResponse:
    """The database went away mid-request (restart, failover, network): 503, retryable."""
    log.warning("database_unavailable", error_type=type(exc).__name__)
    return error_response(
        503,
        "database_unavailable",
        "the database is not reachable right now; retry shortly",
        headers={"Retry-After": "1"},
    )


async def _maybe_database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """asyncpg's interface errors are an outage when the connection broke ("connection is
    closed", a protocol torn mid-reply): 503 like the others. Any other one is a bug: re-raised,
    so the request middleware answers 500 internal_error and logs it."""
    if is_transient(exc):
        return await _database_unavailable(request, exc)
    raise exc


async def _statement_timeout(_: Request, exc: Exception) -> JSONResponse:
    """A statement ran past API_STATEMENT_TIMEOUT_MS (PostgreSQL cancelled it, or the client's
    deadline a second later did): 503 with its own code, so a too-broad search says what
    happened instead of looking like an outage."""
    log.warning("statement_timeout", error_type=type(exc).__name__)
    return error_response(
        503,
        "statement_timeout",
        "the query took too long and was cancelled; narrow the filter or retry",
        headers={"Retry-After": "1"},
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(domain.CodityError, _codity_error)
    # Starlette picks the most specific class: QueryCanceledError is an OperatorInterventionError
    # (mapped to an outage below) but a cancelled statement is not an outage.
    app.add_exception_handler(asyncpg.QueryCanceledError, _statement_timeout)
    app.add_exception_handler(TimeoutError, _statement_timeout)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(asyncpg.IntegrityConstraintViolationError, _integrity_error)
    app.add_exception_handler(asyncpg.DataError, _integrity_error)
    for lost in (
        asyncpg.PostgresConnectionError,
        asyncpg.exceptions.OperatorInterventionError,  # admin shutdown, cannot connect now
        ConnectionError,
    ):
        app.add_exception_handler(lost, _database_unavailable)
    for maybe_lost in (asyncpg.InterfaceError, asyncpg.InternalClientError):
        app.add_exception_handler(maybe_lost, _maybe_database_unavailable)


#: The error responses every operation documents (OpenAPI), all with the one envelope.
def documented_errors(statuses: Sequence[int]) -> dict[int | str, dict[str, Any]]:
    return {
        status: {"model": ErrorEnvelope, "description": _CODE_BY_STATUS.get(status, "error")}
        for status in statuses
    }
