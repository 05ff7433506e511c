"""structlog configuration: readable in a terminal, JSON lines when not a TTY.

The redaction processor is the last line of defence for the rule that payload values never
reach a log: any field named like a payload or a secret is replaced by its size and keys.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

import structlog

#: Fields whose values are never logged. Payload-like fields become {"size", "keys"}.
PAYLOAD_FIELDS = frozenset({"payload", "result", "body", "data", "headers", "args", "kwargs"})
SECRET_FIELDS = frozenset(
    {
        "password",
        "token",
        "access_token",
        "refresh_token",
        "secret",
        "api_key",
        "authorization",
        "cookie",
        "key",
    }
)


def describe(value: Any) -> dict[str, Any]:
    """Size and keys of a value, never the value itself."""
    import json

    try:
        size = len(json.dumps(value, default=str).encode())
    except (TypeError, ValueError):
        size = -1
    keys = sorted(str(k) for k in value) if isinstance(value, Mapping) else None
    return {"size": size, "keys": keys}


def redact_processor(
    _: Any, __: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for name in list(event_dict):
        lowered = name.lower()
        if lowered in SECRET_FIELDS or lowered.endswith(("_password", "_token", "_secret")):
            event_dict[name] = "[redacted]"
        elif lowered in PAYLOAD_FIELDS:
            event_dict[name] = describe(event_dict[name])
    return event_dict


def configure_logging(
    level: str = "INFO", fmt: str = "auto", *, service: str | None = None
) -> None:
    json_output = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer()
    )
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_processor,
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info if json_output else structlog.dev.set_exc_info,
        renderer,
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    if service:
        structlog.contextvars.bind_contextvars(service=service)
