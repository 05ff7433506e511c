"""`codity bench tracing`'s baselines measure what they say (the benchmark itself is not run
here: these are its mechanisms, on a few jobs).

- "hooks removed" really takes the per-attempt hook out of the drain: the worker calls the
  hookless `run_attempt` for every job, and that returns the attempt's own coroutine (no
  `tracer is None` check, no extra frame). If the executor stopped calling `run_attempt`
  through its module, the patch would silently change nothing and the baseline would be the
  hooked drain again: the call count catches that.
- the micro-benchmark times the real `run_attempt(..., tracer=None)` against that call.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench import tracing_mode

from codity.cli import benchmarks
from codity.worker import executor

SCRIPT = Path(tracing_mode.__file__)


async def test_the_hookless_drain_runs_every_attempt_without_the_hook(
    pg_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor, "run_attempt", executor.run_attempt)  # restored afterwards
    tracing_mode.remove_the_hooks()
    hookless = executor.run_attempt
    assert not inspect.iscoroutinefunction(hookless)
    calls: list[Any] = []

    def counting(ctx: Any, **kwargs: Any) -> Any:
        attempt = hookless(ctx, **kwargs)
        assert attempt.cr_code is executor._run_attempt.__code__  # the attempt itself
        calls.append(ctx.job_id)
        return attempt

    monkeypatch.setattr(executor, "run_attempt", counting)
    result = await benchmarks.throughput(pg_server_url, 40, 1, 10)
    assert result.jobs == 40
    assert len(set(calls)) == 40


def test_the_micro_benchmark_times_the_hook_with_opentelemetry_absent(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "micro", "2000"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(figures) == {"mode", "with_hook_ns", "hookless_ns", "hook_ns", "traceparent_ns"}
    assert figures["with_hook_ns"] > 0
    assert figures["hookless_ns"] > 0
    assert figures["hook_ns"] == pytest.approx(figures["with_hook_ns"] - figures["hookless_ns"])


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "sideways", "x", "1", "1", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert "unknown mode 'sideways'" in out.stderr
