from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codity.domain.backoff import BackoffPolicy, backoff_delay_ms, ceiling_ms
from codity.domain.errors import ValidationError
from codity.domain.states import BackoffStrategy


class _Max:
    """A jitter source that always draws the top of the range."""

    def uniform(self, a: float, b: float) -> float:
        return b


class _Min:
    def uniform(self, a: float, b: float) -> float:
        return a


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("fixed", [500, 500, 500, 500]),
        ("linear", [500, 1000, 1500, 2000]),
        ("exponential", [500, 1000, 2000, 4000]),
    ],
)
def test_growth_without_jitter(strategy: str, expected: list[int]) -> None:
    got = [backoff_delay_ms(strategy, a, 500, 10_000, False) for a in range(1, 5)]
    assert got == expected


def test_clamped_to_max_before_jitter() -> None:
    assert backoff_delay_ms("exponential", 10, 1000, 5000, False) == 5000
    # jitter draws from [0, clamped], never from the unclamped 512 s
    assert backoff_delay_ms("exponential", 10, 1000, 5000, True, _Max()) == 5000
    assert backoff_delay_ms("exponential", 10, 1000, 5000, True, _Min()) == 0


def test_huge_attempt_does_not_overflow() -> None:
    assert (
        backoff_delay_ms(BackoffStrategy.EXPONENTIAL, 10_000, 1000, 3_600_000, False) == 3_600_000
    )


def test_jitter_spreads_delays() -> None:
    rng = random.Random(7)
    draws = {backoff_delay_ms("fixed", 1, 10_000, 10_000, True, rng) for _ in range(200)}
    assert len(draws) > 100  # a crowd failing together does not retry together
    assert all(0 <= d <= 10_000 for d in draws)


def test_default_policy_is_exponential_1s_to_1h() -> None:
    p = BackoffPolicy(jitter=False)
    assert [p.delay_ms(a) for a in (1, 2, 3)] == [1000, 2000, 4000]
    assert p.delay_ms(40) == 3_600_000


@pytest.mark.parametrize("attempt", [0, -1])
def test_attempt_must_be_positive(attempt: int) -> None:
    with pytest.raises(ValidationError):
        backoff_delay_ms("fixed", attempt, 1, 1, False)


def test_unknown_strategy_rejected() -> None:
    with pytest.raises(ValueError):
        backoff_delay_ms("quadratic", 1, 1, 1, False)


@settings(max_examples=200, deadline=None)
@given(
    strategy=st.sampled_from(list(BackoffStrategy)),
    attempt=st.integers(1, 200),
    base=st.integers(0, 100_000),
    extra=st.integers(0, 10_000_000),
    seed=st.integers(0, 2**32),
)
def test_jittered_delay_within_bounds(
    strategy: BackoffStrategy, attempt: int, base: int, extra: int, seed: int
) -> None:
    top = ceiling_ms(strategy, attempt, base, base + extra)
    assert top <= base + extra
    d = backoff_delay_ms(strategy, attempt, base, base + extra, True, random.Random(seed))
    assert 0 <= d <= top
