"""Codity Scheduler: a job scheduler on PostgreSQL. The public Python API (docs/PYTHON_API.md):

    import codity

    app = codity.App()

    @app.task(queue="emails", max_attempts=5)
    async def send_welcome(user_id: int) -> None: ...

    await send_welcome.enqueue(user_id=42)

The names below are loaded on first use (PEP 562), so `import codity` — and every `codity`
command that needs none of them — does not pay for importing the worker and the drivers.
`codity.client` (the REST client) and `codity.testing` are modules of their own.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

VERSION = "0.1.0"

if TYPE_CHECKING:
    from codity.core.enqueue import EnqueuedJob, NewJob
    from codity.domain.errors import (
        CodityError,
        ConfigurationError,
        QueueNotFoundError,
        ValidationError,
    )
    from codity.domain.states import JobStatus
    from codity.tasks import App, Task, TaskCall
    from codity.worker.context import JobContext

_EXPORTS = {
    "App": "codity.tasks",
    "Task": "codity.tasks",
    "TaskCall": "codity.tasks",
    "JobContext": "codity.worker.context",
    "NewJob": "codity.core.enqueue",
    "EnqueuedJob": "codity.core.enqueue",
    "JobStatus": "codity.domain.states",
    "CodityError": "codity.domain.errors",
    "ConfigurationError": "codity.domain.errors",
    "QueueNotFoundError": "codity.domain.errors",
    "ValidationError": "codity.domain.errors",
}

__all__ = [
    "VERSION",
    "App",
    "CodityError",
    "ConfigurationError",
    "EnqueuedJob",
    "JobContext",
    "JobStatus",
    "NewJob",
    "QueueNotFoundError",
    "Task",
    "TaskCall",
    "ValidationError",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'codity' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
