"""Keyset pagination cursors: opaque to clients, a small JSON list inside base64url."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from codity.api.resource_errors import InvalidCursorError


def encode_cursor(*values: Any) -> str:
    raw = json.dumps(list(values), separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, arity: int) -> list[Any]:
    """The values a cursor carries; `InvalidCursorError` when it was not made by `encode_cursor`."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError, binascii.Error):
        raise InvalidCursorError("cursor is not valid: pass next_cursor back unchanged") from None
    if not isinstance(values, list) or len(values) != arity:
        raise InvalidCursorError("cursor is not valid: pass next_cursor back unchanged")
    return values
