"""Tenant scope in the data layer — the API's SQL lives in named files, one pagination kit.

The second layer of tenant isolation is a property of the statements (each names the project);
it can be reviewed, and the isolation walk's unscoped-SQL break can rewrite it, only when every
statement the API runs is one of the annotated `db/sql/*.sql` files loaded by name. A literal
passed to a connection method would be outside both. Likewise there is one cursor codec and
one InvalidCursorError (two of each existed once, and a cursor of one kind decoded by the other
answered 500).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue, make_tenant

import codity
from codity import core
from codity.api import pagination
from codity.domain.errors import QueueNotFoundError

SRC = Path(codity.__file__).parent
#: Methods of asyncpg connections and pools that take a statement.
STATEMENT_METHODS = {
    "execute",
    "executemany",
    "fetch",
    "fetchrow",
    "fetchval",
    "prepare",
    "cursor",
    "copy_from_query",
}


def _inline_statements(path: Path, root: Path = SRC) -> list[str]:
    """`file:line` of each call of a connection method whose statement is written in place
    (a string literal, an f-string or a concatenation) instead of loaded by name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in STATEMENT_METHODS or not node.args:
            continue
        first = node.args[0]
        literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
        if literal or isinstance(first, ast.JoinedStr | ast.BinOp):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_the_api_runs_no_statement_written_in_place() -> None:
    """Break it: put back `conn.fetchval("SELECT clock_timestamp()")` in stores/jobs.py or
    `conn.execute("SELECT 1")` in api/events.py (both were there)."""
    files = sorted((SRC / "api").rglob("*.py"))
    assert len(files) > 20  # the walk sees the package
    inline = [where for path in files for where in _inline_statements(path)]
    assert inline == [], "move these statements into src/codity/db/sql/api_*.sql"


def test_the_detector_sees_a_statement_written_in_place(tmp_path: Path) -> None:
    """The check above cannot pass by seeing nothing."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "async def f(conn, t):\n"
        '    await conn.fetchval("SELECT now()")\n'
        '    await conn.execute(f"DELETE FROM {t}")\n'
        "    await conn.fetch(sql('by_name'))\n"
    )
    assert _inline_statements(sample, tmp_path) == ["sample.py:2", "sample.py:3"]


def test_one_pagination_kit() -> None:
    """One cursor codec and one InvalidCursorError in the whole package. Break it: define a
    second `InvalidCursorError` or `encode_cursor` anywhere under src/codity."""
    defined: dict[str, list[str]] = {
        "InvalidCursorError": [],
        "encode_cursor": [],
        "decode_cursor": [],
    }
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            named = isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            if named and node.name in defined:
                defined[node.name].append(str(path.relative_to(SRC)))
    assert defined == {
        "InvalidCursorError": ["domain/errors.py"],
        "encode_cursor": ["api/pagination.py"],
        "decode_cursor": ["api/pagination.py"],
    }
    assert pagination.decode_cursor(pagination.encode_cursor(7, "x"), int, str) == (7, "x")


# --- enqueue names the project (defence in depth: the API resolves the queue first) ---------


@pytest.mark.parametrize(
    "job",
    [
        core.NewJob(handler="h"),  # the single statement (insert_jobs checks the project)
        core.NewJob(handler="h", unique_for_s=60),  # the longer plan (the queue read first)
    ],
    ids=["one-statement", "queue-read-first"],
)
async def test_enqueue_refuses_another_projects_queue_and_writes_nothing(
    db: asyncpg.Connection[Any], job: core.NewJob
) -> None:
    """Break it: drop `AND ($20::uuid IS NULL OR q.project_id = $20::uuid)` from insert_jobs
    (enqueue.sql) and the one-statement case fails; the longer plan is refused twice (`_queue_plan`
    in core/enqueue.py, before any read of the queue's keys, and the insert itself): drop both
    and it fails too."""
    mine, theirs = await make_tenant(db), await make_tenant(db)
    their_queue = await make_queue(db, theirs.project_id)
    with pytest.raises(QueueNotFoundError):
        await core.enqueue(db, their_queue, job, project_id=mine.project_id)
    with pytest.raises(QueueNotFoundError):
        await core.enqueue_many(db, their_queue, [job, job], project_id=mine.project_id)
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE queue_id = $1", their_queue) == 0
    # The owner's own call goes through, so the refusal above is the project check.
    made = await core.enqueue(db, their_queue, job, project_id=theirs.project_id)
    assert made.created
