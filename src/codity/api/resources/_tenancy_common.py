"""Small helpers the org, member, project and API-key resources share."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from fastapi import Query

from codity.domain.errors import ValidationError

DEFAULT_LIMIT = 50
MAX_LIMIT = 200

PageLimit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="page size (default 50)")]
PageCursor = Annotated[
    str | None,
    Query(min_length=1, max_length=500, description="next_cursor of the previous page"),
]


class InvalidCursorError(ValidationError):
    code = "invalid_cursor"


def encode_cursor(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (ValueError, UnicodeError, binascii.Error):
        raise InvalidCursorError("cursor is not valid: pass next_cursor back unchanged") from None
    if not value or "\x00" in value:
        raise InvalidCursorError("cursor is not valid: pass next_cursor back unchanged")
    return value
