"""The garbage collector's settings in a worker process.

A worker makes and drops a dozen small objects per job, thousands of jobs a second. CPython's
cyclic collector runs a young-generation pass every 700 allocations and, every hundred of those,
a full pass over every tracked object in the process — the ~120,000 objects its imports left
(the driver, structlog, pydantic, typer, the handlers) included. In the throughput drain that
was a third of the worker's own CPU per job (25 -> 17 us with the settings below). So, once
the process has loaded everything it will run (before the worker starts):

- `gc.freeze()`: what exists now moves to a permanent generation that no pass visits again
  (the objects of a long-lived process's start-up are not garbage);
- the young-generation threshold goes from 700 to GEN0_THRESHOLD allocations: the jobs' own
  objects are freed by reference counting as soon as a job ends, so collecting them for cycles
  ten times less often costs little memory.

Applied by `codity worker` (and by `codity bench`, which runs workers in its own process), not
by the `Worker` class: an application embedding a Worker owns its process's collector.
"""

from __future__ import annotations

import gc
from typing import Final

#: Allocations between two young-generation collections (CPython's default is 700).
GEN0_THRESHOLD: Final = 10_000


def tune_for_worker() -> None:
    """Collect once, freeze what start-up made, and collect the young generation less often."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, GEN0_THRESHOLD), middle, old)
