"""Test helpers for applications that use codity (docs/PYTHON_API.md, "Testing").

Two ways to test code that enqueues tasks:

- **Eager mode**, no database: `with codity.testing.eager(app) as runs:` makes every
  `.enqueue(...)` of the app's tasks run the task at once, with the same argument validation
  and JSON serialisation as a real enqueue; `runs.runs` lists what ran and what it returned.
- **The real thing**, with the pytest plugin (installed with codity, nothing to configure):
  the `codity_database` fixture gives a migrated throwaway database (`.setup(app)` points the
  app at it and creates its tasks' queues), and `codity_worker.run_until_empty(app)` runs a
  real worker until no job is left to run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from codity.tasks import App, EagerContext, EagerRun, EagerRunner
from codity.testing.database import TestDatabase
from codity.testing.worker import Drained, TestWorker


@contextlib.contextmanager
def eager(app: App) -> Iterator[EagerRunner]:
    """Run `app`'s tasks inline while the block runs; yields the runner (`.runs`)."""
    previous, runner = app.eager, app.eager_runner
    app.eager, app.eager_runner = True, EagerRunner()
    try:
        yield app.eager_runner
    finally:
        app.eager, app.eager_runner = previous, runner


__all__ = [
    "Drained",
    "EagerContext",
    "EagerRun",
    "EagerRunner",
    "TestDatabase",
    "TestWorker",
    "eager",
]
