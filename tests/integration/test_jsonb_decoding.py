"""jsonb values come back decoded exactly as json.loads decodes PostgreSQL's text of them
(`db.pool.decode_jsonb` reads jsonb with the standard library's scanner directly: every claimed
job's payload passes through it)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest

from codity.db.pool import decode_jsonb

#: What a payload can hold that a decoder could get wrong: integers past 64 bits (kept exact),
#: floats at the edges of their text forms, escapes and non-ASCII text, deep nesting, scalars.
VALUES = [
    "{}",
    "[]",
    "null",
    "true",
    "0",
    "-0",
    "123456789012345678901234567890",
    "-9223372036854775809",
    "0.1",
    "1e-7",
    "1.5e300",
    "12345678901234567890.123456789",
    '"plain"',
    '"tab\\t, quote \\", backslash \\\\, e acute \\u00e9, emoji \\ud83d\\ude00, nul-free"',
    '{"é": "ü", "日本": ["語"], "": 0}',
    '{"customer_id": 4242, "tags": ["a", "b"], "order": {"items": [{"qty": 2, "price": 9.5}]}}',
    "[" * 200 + "1" + "]" * 200,
]


@pytest.mark.parametrize("text", VALUES)
async def test_jsonb_decodes_as_json_loads_does(db: asyncpg.Connection[Any], text: str) -> None:
    decoded, printed = await db.fetchrow("SELECT $1::text::jsonb, $1::text::jsonb::text", text)
    # (PostgreSQL's text, not ours: jsonb keeps numbers as numeric, so 1.5e300 comes back
    # as the integer it is.)
    expected = json.loads(printed)
    assert decoded == expected
    assert type(decoded) is type(expected)
    assert json.dumps(decoded) == json.dumps(expected)  # floats and nesting alike, exactly


async def test_json_keeps_its_text_and_still_decodes(db: asyncpg.Connection[Any]) -> None:
    # json (not jsonb) is returned as written, surrounding whitespace included.
    assert await db.fetchval("SELECT $1::text::json", ' \n{"a": [1, 2]} ') == {"a": [1, 2]}


def test_text_that_is_not_one_json_value_fails_as_json_loads_fails() -> None:
    assert decode_jsonb(' {"a": 1} ') == {"a": 1}  # whitespace around: json.loads reads it
    for bad in ["", "nope", "{} trailing", "{"]:
        with pytest.raises(json.JSONDecodeError) as fast:
            decode_jsonb(bad)
        with pytest.raises(json.JSONDecodeError) as slow:
            json.loads(bad)
        assert str(fast.value) == str(slow.value)
