"""Named SQL: hot-path statements live in annotated `.sql` files under `db/sql/`, loaded by name.

A file holds one or more statements, each introduced by a `-- name: <identifier>` line; the
comment lines under it document the statement and stay in the text sent to the server
(PostgreSQL ignores them), so EXPLAIN output and pg_stat_statements show the annotation too.

Two ways to call a statement:

- `sql(name)`: the text as written, with positional `$1, $2...` parameters (the engine's
  hot-path statements: claim, lease, outcomes, enqueue); `spliced(name, *fragments)`: the same
  with named fragments put in at their marks (a clause only some calls need, e.g. the bulk
  enqueue's ON CONFLICT when a job has an idempotency key).
- `bind(name, *fragments, **params)`: statements that name their parameters (`:project_id`),
  the API's. A statement with a `/*fragments*/` mark takes named fragments (themselves named
  statements, e.g. `AND j.status = ANY(:statuses::job_status[])`) there, so each list filter
  shape is one fixed statement text. `bind` numbers the parameters and orders the values.
  A fragment whose text has a `-- slot: <slot>` line goes to the `/*<slot>*/` mark instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

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


# --- named parameters and composable fragments (the API's statements) --------------------------

#: What the parameter scanner steps over: string literals, quoted identifiers and `--` comments
#: (kept verbatim), and a `:name` parameter (not a `::type` cast: no colon or word before it).
_TOKENS = re.compile(
    r"(?P<skip>'(?:[^']|'')*'|\"[^\"]*\"|--[^\n]*)|(?<![:\w]):(?P<param>[a-z_][a-z0-9_]*)"
)
#: Where a statement takes its fragments: `/*fragments*/`, or `/*<slot>*/` for a fragment that
#: names its slot on a `-- slot: <slot>` line (a statement with a condition in a subquery too).
_SLOT = re.compile(r"^--\s*slot:\s*([a-z_]+)\s*$", re.MULTILINE)
DEFAULT_SLOT = "fragments"
#: A mark (replaced by NUL for the search) after `--` on its line.
_MARK_IN_COMMENT = re.compile(r"--[^\n]*\0")


@dataclass(frozen=True)
class Bound:
    """A statement ready to send: its text (`$n` placeholders) and its arguments, in order.

    `conn` is an asyncpg Connection or Pool: `rows = await bind(...).fetch(conn)`.
    """

    text: str
    args: tuple[Any, ...]

    async def fetch(self, conn: Any) -> list[Any]:
        rows: list[Any] = await conn.fetch(self.text, *self.args)
        return rows

    async def fetchrow(self, conn: Any) -> Any:
        return await conn.fetchrow(self.text, *self.args)

    async def fetchval(self, conn: Any) -> Any:
        return await conn.fetchval(self.text, *self.args)

    async def execute(self, conn: Any) -> str:
        status: str = await conn.execute(self.text, *self.args)
        return status


def spliced(statement: str, /, *fragments: str) -> str:
    """The text of `statement` with the named `fragments` spliced in at their marks
    (`/*fragments*/`, or the `/*<slot>*/` a fragment's `-- slot:` line names); with none, the
    statement as written. Each set of fragments is a statement text of its own."""
    return _spliced(statement, fragments) if fragments else sql(statement)


@lru_cache(maxsize=512)
def _spliced(statement: str, fragments: tuple[str, ...]) -> str:
    text = sql(statement)
    by_slot: dict[str, list[str]] = {}
    for fragment in fragments:
        body = sql(fragment)
        named = _SLOT.search(body)
        by_slot.setdefault(named.group(1) if named else DEFAULT_SLOT, []).append(body)
    for slot, bodies in by_slot.items():
        mark = f"/*{slot}*/"
        if mark not in text:
            raise ValueError(f"SQL statement {statement!r} has no {mark} for {fragments}")
        if _MARK_IN_COMMENT.search(text.replace(mark, "\0")):
            # the fragment would be spliced into the comment too, its first line commented out
            raise ValueError(f"SQL statement {statement!r} names {mark} in a comment")
        # The mark stays in front of what is spliced (it is a comment): EXPLAIN output then
        # shows where each condition came from.
        text = text.replace(mark, mark + "\n" + "\n".join(bodies))
    return text


@lru_cache(maxsize=512)
def _numbered(statement: str, fragments: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The text of `statement` with `fragments` spliced in, and the parameter names in `$n`
    order."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        param = match.group("param")
        if param is None:
            return match.group(0)
        if param not in order:
            order.append(param)
        return f"${order.index(param) + 1}"

    return _TOKENS.sub(number, _spliced(statement, fragments)), tuple(order)


def bind(statement: str, /, *fragments: str, **params: Any) -> Bound:
    """The `statement` with the named `fragments` spliced at its `/*fragments*/` mark (or
    at the mark their `-- slot:` line names), its `:name` parameters numbered and `params` put
    in that order.

    Each set of fragments is a statement of its own (its own prepared statement and plan), so a
    list filter becomes a real index condition instead of an `(:x IS NULL OR col = :x)` that a
    generic plan cannot use. A missing or an unused parameter is an error, not a silent NULL.
    """
    text, order = _numbered(statement, fragments)
    missing = [p for p in order if p not in params]
    unused = sorted(set(params) - set(order))
    if missing or unused:
        raise ValueError(
            f"SQL statement {statement!r} with {list(fragments)}: missing parameters {missing}, "
            f"unused parameters {unused}"
        )
    return Bound(text, tuple(params[p] for p in order))


@dataclass
class Fragments:
    """The fragments one call of a statement gets, collected condition by condition:

    where = Fragments()
    if queue_id is not None:
        where.add("api_jobs_when_queue", queue_id=queue_id)
    q = where.bind("api_jobs_list", project_id=project_id, limit=limit)
    """

    names: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def add(self, fragment: str, **params: Any) -> Fragments:
        self.names.append(fragment)
        self.params.update(params)
        return self

    def bind(self, statement: str, /, **params: Any) -> Bound:
        return bind(statement, *self.names, **self.params, **params)
