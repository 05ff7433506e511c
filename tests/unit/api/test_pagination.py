"""The pagination kit: one cursor codec for every list."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from codity.api.pagination import decode_cursor, encode_cursor, next_cursor
from codity.domain.errors import InvalidCursorError


def test_a_key_round_trips_with_its_types() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    ident = uuid.uuid4()
    cursor = encode_cursor(at, ident)
    assert decode_cursor(cursor, datetime, uuid.UUID) == (at, ident)
    assert decode_cursor(encode_cursor(42), int) == (42,)
    assert decode_cursor(encode_cursor("emails"), str) == ("emails",)
    assert decode_cursor(None, int) is None  # the first page


@pytest.mark.parametrize(
    ("cursor", "kinds"),
    [
        ("not base64!", (int,)),
        (encode_cursor(1, 2), (int,)),  # wrong arity
        (encode_cursor("x"), (int,)),  # wrong type
        (encode_cursor(True), (int,)),  # a bool is not an id
        (encode_cursor(""), (str,)),
        (encode_cursor("a\x00b"), (str,)),
        (encode_cursor("2026-01-01T00:00:00"), (datetime,)),  # naive timestamp
        (encode_cursor("nope"), (uuid.UUID,)),
        ("e30", (int,)),  # {} is JSON, not a key
    ],
)
def test_anything_else_is_invalid_cursor(cursor: str, kinds: tuple[type, ...]) -> None:
    with pytest.raises(InvalidCursorError):
        decode_cursor(cursor, *kinds)


def test_next_cursor_only_after_a_full_page() -> None:
    assert next_cursor([1, 2], 3, lambda n: (n,)) is None
    assert next_cursor([], 3, lambda n: (n,)) is None
    assert decode_cursor(next_cursor([1, 2, 3], 3, lambda n: (n,)), int) == (3,)
