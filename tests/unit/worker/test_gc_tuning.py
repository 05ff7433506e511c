"""The worker process's collector settings: start-up objects frozen, young passes less often."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from codity.worker.gc_tuning import GEN0_THRESHOLD, tune_for_worker


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_gc")
def test_tuning_freezes_what_exists_and_raises_the_young_threshold() -> None:
    gc.unfreeze()
    before = len(gc.get_objects())
    assert before > 0
    tune_for_worker()
    assert gc.get_freeze_count() >= before // 2  # start-up objects no longer tracked by passes
    assert gc.get_threshold()[0] >= GEN0_THRESHOLD
