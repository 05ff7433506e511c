"""ASGI middleware: request context + access log + last-resort errors, security headers,
CORS (Starlette's, refused preflights in the envelope) and the request body size limit.

Order, outermost first: RequestContext -> SecurityHeaders -> CORS -> BodySizeLimit -> app.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import structlog
from starlette.datastructures import Headers, MutableHeaders, State
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codity.api.errors import error_response
from codity.api.request_context import (
    REQUEST_ID_HEADER,
    client_ip_var,
    new_request_id,
    request_id_var,
    settings_var,
)
from codity.settings import Settings

log = structlog.get_logger("codity.api.access")


class RequestContextMiddleware:
    """Request id in and out (`X-Request-ID`), bound into structlog's contextvars; one access
    log line per request (method, path, status, duration, sizes, never bodies or headers); and
    any unhandled exception logged with the request id and answered as a 500 envelope."""

    def __init__(self, app: ASGIApp, state: State) -> None:
        self.app = app
        self.state = state  # the app's state: its `settings` are read per request

    def _settings(self) -> Settings:
        settings: Settings = self.state.settings
        return settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_request_id(Headers(scope=scope).get(REQUEST_ID_HEADER))
        client = scope.get("client")
        ip = client[0] if client else None
        tokens = (
            request_id_var.set(request_id),
            client_ip_var.set(ip),
            settings_var.set(self._settings()),
        )
        structlog.contextvars.bind_contextvars(request_id=request_id)
        started = time.perf_counter()
        status = 500
        response_started = False
        response_bytes = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started, response_bytes
            if message["type"] == "http.response.start":
                response_started = True
                status = message["status"]
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            elif message["type"] == "http.response.body":
                response_bytes += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("unhandled_error", method=scope["method"], path=scope["path"])
            if response_started:
                raise
            response = error_response(
                500, "internal_error", "an internal error occurred; quote the request id"
            )
            await response(scope, receive, send_with_id)
        finally:
            log.info(
                "request",
                method=scope["method"],
                path=scope["path"],
                status=status,
                duration_ms=round((time.perf_counter() - started) * 1000, 2),
                response_bytes=response_bytes,
                client_ip=ip,
                request_id=request_id,
            )
            structlog.contextvars.unbind_contextvars("request_id")
            settings_var.reset(tokens[2])
            client_ip_var.reset(tokens[1])
            request_id_var.reset(tokens[0])


#: Swagger UI needs inline script/style for its bootstrap snippet; everything else is locked down.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
)
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp, docs_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.docs_paths = tuple(docs_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        is_docs = scope["path"].startswith(self.docs_paths) if self.docs_paths else False
        csp = DOCS_CSP if is_docs else API_CSP

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("X-Frame-Options", "DENY")
                headers.setdefault("Referrer-Policy", "no-referrer")
                headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
                headers.setdefault("Content-Security-Policy", csp)
                headers.setdefault("Cache-Control", "no-store")
            await send(message)

        await self.app(scope, receive, send_with_headers)


class EnvelopeCORSMiddleware(CORSMiddleware):
    """Starlette's CORS with our allowlist; a refused preflight answers the error envelope
    (code `cors_rejected`) instead of plain text, like every other error."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        reason = bytes(response.body).decode()
        keep = {
            k: v
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", "content-type")
        }
        return error_response(400, "cors_rejected", reason, None, keep)


class BodyTooLargeError(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


class BodySizeLimitMiddleware:
    """413 for a body over MAX_REQUEST_BODY_BYTES: refused up front from Content-Length, and
    counted while streaming for chunked bodies (which have no Content-Length)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # Raised inside the app's body read; the HTTPException handler answers 413.
                    raise BodyTooLargeError(self.max_bytes)
            return message

        await self.app(scope, counting_receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            "payload_too_large",
            f"the request body is larger than {self.max_bytes} bytes",
            {"max_bytes": self.max_bytes},
        )
        await response(scope, receive, send)


__all__: list[Any] = [
    "BodySizeLimitMiddleware",
    "EnvelopeCORSMiddleware",
    "RequestContextMiddleware",
    "SecurityHeadersMiddleware",
]
