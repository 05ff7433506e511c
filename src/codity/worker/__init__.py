"""The worker: claims jobs sized to its free slots, runs handlers, records outcomes in batches.

User code plugs in with `@handler("name")` (see `examples/`); `codity worker --app module`
imports the module so its handlers register.
"""

from __future__ import annotations

from codity.worker.context import JobContext
from codity.worker.registry import HandlerRegistry, default_registry, handler, load_app

__all__ = ["HandlerRegistry", "JobContext", "default_registry", "handler", "load_app"]
