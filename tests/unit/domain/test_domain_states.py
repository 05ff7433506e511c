"""The lifecycle allowed-map: frozen, and every edge outside it raises."""

from __future__ import annotations

import itertools

import pytest

from codity.domain.errors import IllegalTransitionError
from codity.domain.states import (
    ALLOWED_TRANSITIONS,
    JobStatus,
    assert_transition,
    can_transition,
)


def test_every_pair_is_allowed_exactly_when_in_the_map() -> None:
    for src, dst in itertools.product(JobStatus, JobStatus):
        if dst in ALLOWED_TRANSITIONS[src]:
            assert_transition(src, dst)
            assert can_transition(src, dst)
        else:
            with pytest.raises(IllegalTransitionError) as info:
                assert_transition(src, dst)
            assert info.value.details == {"from": src.value, "to": dst.value}
            assert src.value in info.value.message


def test_completed_is_final() -> None:
    assert ALLOWED_TRANSITIONS[JobStatus.COMPLETED] == frozenset()


def test_the_map_is_frozen() -> None:
    with pytest.raises(TypeError):
        ALLOWED_TRANSITIONS[JobStatus.COMPLETED] = frozenset({JobStatus.QUEUED})  # type: ignore[index]
    assert all(isinstance(v, frozenset) for v in ALLOWED_TRANSITIONS.values())
    assert set(ALLOWED_TRANSITIONS) == set(JobStatus)
