"""codity is a typed package (PEP 561, `src/codity/py.typed`): an application checked with
`mypy --strict` sees the signatures of `codity.App`, `@app.task` and `.enqueue`, so a wrong
argument to an enqueue is a type error in the application, not only a ValidationError at run
time. Without the marker mypy refuses to analyse codity (`import-untyped`) and every
`@app.task` makes its function untyped.

mypy runs in a directory of its own (no project config, no MYPYPATH), against codity as this
interpreter has it installed, exactly as in an application's checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import codity

APPLICATION = """
from __future__ import annotations

import asyncio

import codity

app = codity.App(project="acme/shop")


@app.task(queue="emails", max_attempts=3)
async def send_welcome(user_id: int, locale: str = "en") -> None: ...


@app.task(queue="reports")
def build(ctx: codity.JobContext, days: int) -> int:
    return days


async def main() -> codity.EnqueuedJob:
    await send_welcome.enqueue(42)
    await send_welcome.options(delay_s=5, idempotency_key="w-1").enqueue(1, locale="fr")
    many: list[codity.EnqueuedJob] = await send_welcome.enqueue_many([{"user_id": 1}])
    assert many
    return build.enqueue_sync(days=1)


asyncio.run(main())
"""

MISTAKES = """
from __future__ import annotations

import codity

app = codity.App()


@app.task(queue="emails")
async def send_welcome(user_id: int, locale: str = "en") -> None: ...


@app.task(queue="reports")
def build(ctx: codity.JobContext, days: int) -> int:
    return days


async def main() -> None:
    await send_welcome.enqueue(user_id="x")
    build.enqueue_sync(days="seven")
    await send_welcome.options(delay_s=5).enqueue(1, locale=2)
"""


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "application.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--cache-dir", str(tmp_path / ".mypy_cache"), "application.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_package_carries_the_pep_561_marker() -> None:
    assert (Path(codity.__file__).parent / "py.typed").is_file()


def test_an_application_under_mypy_strict_type_checks(tmp_path: Path) -> None:
    result = _mypy(tmp_path, APPLICATION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found in 1 source file" in result.stdout


def test_wrong_enqueue_arguments_are_type_errors_in_the_application(tmp_path: Path) -> None:
    result = _mypy(tmp_path, MISTAKES)
    errors = sorted(line.split(": error: ")[1] for line in result.stdout.splitlines()
                    if ": error: " in line)  # fmt: skip
    assert errors == [
        'Argument "days" to "enqueue_sync" of "Task" has incompatible type "str"; '
        'expected "int"  [arg-type]',
        'Argument "locale" to "enqueue" of "TaskCall" has incompatible type "int"; '
        'expected "str"  [arg-type]',
        'Argument "user_id" to "enqueue" of "Task" has incompatible type "str"; '
        'expected "int"  [arg-type]',
    ], result.stdout
