"""Per-request values that outlive the handler's arguments: request id, client IP, settings.

The middleware sets them once per request; error handlers, the audit helper and log lines read
them from here instead of threading the `Request` through every call.
"""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar

from codity.settings import Settings, get_settings

REQUEST_ID_HEADER = "X-Request-ID"
#: An incoming id is echoed only when it is short and plain, so it cannot inject into logs.
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

request_id_var: ContextVar[str] = ContextVar("codity_request_id", default="-")
client_ip_var: ContextVar[str | None] = ContextVar("codity_client_ip", default=None)
#: The settings of the app serving this request (tests run apps with their own settings).
settings_var: ContextVar[Settings | None] = ContextVar("codity_settings", default=None)


def new_request_id(incoming: str | None) -> str:
    if incoming and _SAFE_REQUEST_ID.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


def current_request_id() -> str:
    return request_id_var.get()


def current_client_ip() -> str | None:
    return client_ip_var.get()


def current_settings() -> Settings:
    return settings_var.get() or get_settings()
