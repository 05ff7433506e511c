"""Named SQL: hot-path statements live in annotated `.sql` files under `db/sql/`, loaded by name.

A file holds one or more statements, each introduced by a `-- name: <identifier>` line; the
comment lines under it document the statement and stay in the text sent to the server
(PostgreSQL ignores them), so EXPLAIN output and pg_stat_statements show the annotation too.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

SQL_DIR = Path(__file__).parent / "sql"
_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Split a file's text into {name: statement}; a repeated name is an error."""
    found: dict[str, str] = {}
    marks = list(_NAME.finditer(text))
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        name = mark.group(1)
        if name in found:
            raise ValueError(f"SQL statement {name!r} is defined twice")
        body = text[mark.end() : end].strip().rstrip(";").strip()
        if not body:
            raise ValueError(f"SQL statement {name!r} is empty")
        found[name] = body
    return found


@lru_cache(maxsize=1)
def all_queries() -> MappingProxyType[str, str]:
    merged: dict[str, str] = {}
    for path in sorted(SQL_DIR.glob("*.sql")):
        for name, body in parse(path.read_text()).items():
            if name in merged:
                raise ValueError(f"SQL statement {name!r} is defined in two files")
            merged[name] = body
    return MappingProxyType(merged)


def sql(name: str) -> str:
    """The statement called `name`. Raises KeyError naming the statement when it is unknown."""
    try:
        return all_queries()[name]
    except KeyError:
        raise KeyError(f"no SQL statement named {name!r} under {SQL_DIR}") from None
