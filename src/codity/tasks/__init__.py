"""Tasks: typed functions registered on a `codity.App` and enqueued with `.enqueue(...)`.

See docs/PYTHON_API.md. `App` (app.py) holds the tasks and the connections; `Task` (task.py)
validates arguments (arguments.py) and enqueues through `codity.core`; eager.py runs them
inline for tests.
"""

from __future__ import annotations

from codity.tasks.app import App, TaskDecorator, load_app
from codity.tasks.eager import EagerContext, EagerRun, EagerRunner
from codity.tasks.task import Task, TaskCall, TaskOptions

__all__ = [
    "App",
    "EagerContext",
    "EagerRun",
    "EagerRunner",
    "Task",
    "TaskCall",
    "TaskDecorator",
    "TaskOptions",
    "load_app",
]
