"""Keyset pagination: the one kit every list of the API uses.

A list is ordered by a unique key (`id`, `name` within a project, `(created_at, id)`...). A page
is the `limit` rows after the key of the previous page's last row, so pages stay stable while
rows are added and no OFFSET scan ever happens. The cursor is that key, opaque to clients:
a small JSON list in base64url. Anything else answers 422 `invalid_cursor`.

    async def list_things(ctx: ProjectScope, pool: DbPool,
                          limit: Limit = DEFAULT_PAGE_SIZE, cursor: Cursor = None) -> ThingsPage:
        after = decode_cursor(cursor, datetime, UUID)        # None on the first page
        items = await stores.things.page(pool, ctx.project_id, limit=limit, after=after)
        return ThingsPage(items=items, next_cursor=next_cursor(items, limit,
                                                                lambda t: (t.created_at, t.id)))

The store puts the key in its WHERE clause as a fragment (`AND (s.created_at, s.id) > (...)`)
that is only there on later pages, so the first page's statement has no always-true condition.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Annotated, Any, TypeVar
from uuid import UUID

from fastapi import Query

from codity.api.schemas.common import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, NO_NUL_PATTERN
from codity.domain.errors import InvalidCursorError

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "Cursor",
    "Limit",
    "decode_cursor",
    "encode_cursor",
    "next_cursor",
]

T = TypeVar("T")

Limit = Annotated[
    int,
    Query(ge=1, le=MAX_PAGE_SIZE, description=f"page size (default {DEFAULT_PAGE_SIZE})"),
]
Cursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=500,
        pattern=NO_NUL_PATTERN,
        description="next_cursor of the previous page",
    ),
]

_INVALID = "cursor is not valid: pass next_cursor back unchanged"


def encode_cursor(*key: Any) -> str:
    """The cursor for a key; datetimes and UUIDs travel as their ISO/hex text."""
    values = [v.isoformat() if isinstance(v, datetime) else v for v in key]
    raw = json.dumps(values, separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _typed(value: Any, kind: type[Any]) -> Any:
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("not an integer")
        return value
    if kind is str:
        if not isinstance(value, str) or not value or "\x00" in value:
            raise ValueError("not a text key")
        return value
    if kind is UUID:
        return UUID(str(value))
    if kind is datetime:
        moment = datetime.fromisoformat(str(value))
        if moment.tzinfo is None:
            raise ValueError("not an aware timestamp")
        return moment
    raise TypeError(f"no cursor conversion for {kind.__name__}")


def decode_cursor(cursor: str | None, *kinds: type[Any]) -> tuple[Any, ...] | None:
    """The key a cursor carries, converted to `kinds` (int, str, UUID, datetime), or None when
    there is no cursor (the first page). `InvalidCursorError` for anything `encode_cursor` did
    not make with a key of that shape."""
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True))
        if not isinstance(values, list) or len(values) != len(kinds):
            raise ValueError("wrong shape")
        return tuple(_typed(v, k) for v, k in zip(values, kinds, strict=True))
    except (ValueError, TypeError, UnicodeError, binascii.Error):
        raise InvalidCursorError(_INVALID) from None


def next_cursor(items: Sequence[T], limit: int, key: Callable[[T], tuple[Any, ...]]) -> str | None:
    """The cursor of the page after `items`, or None when this page was the last one.

    A page shorter than `limit` is the last; a full page may be followed by an empty one (the
    price of not counting, which would cost a second scan on every page)."""
    if len(items) < limit or not items:
        return None
    return encode_cursor(*key(items[-1]))
