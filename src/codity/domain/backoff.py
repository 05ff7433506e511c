"""Retry delays: fixed, linear or exponential growth, clamped to a ceiling, then full jitter.

Full jitter (a uniform draw between 0 and the clamped delay) is what stops a crowd of jobs that
failed together from retrying together: 500 jobs failing in one outage spread over the whole
window instead of hammering the recovering service at the same instant.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final, Protocol

from codity.domain.errors import ValidationError
from codity.domain.states import BackoffStrategy

#: The policy used when neither the job nor its queue names one.
DEFAULT_STRATEGY: Final = BackoffStrategy.EXPONENTIAL
DEFAULT_BASE_DELAY_MS: Final = 1_000
DEFAULT_MAX_DELAY_MS: Final = 3_600_000
DEFAULT_JITTER: Final = True

# 2**62 ms is far beyond any ceiling; capping the exponent keeps the arithmetic small.
_MAX_EXPONENT: Final = 62


class UniformSource(Protocol):
    def uniform(self, a: float, b: float) -> float: ...


@dataclass(frozen=True)
class BackoffPolicy:
    strategy: BackoffStrategy = DEFAULT_STRATEGY
    base_delay_ms: int = DEFAULT_BASE_DELAY_MS
    max_delay_ms: int = DEFAULT_MAX_DELAY_MS
    jitter: bool = DEFAULT_JITTER

    def delay_ms(self, attempt: int, rng: UniformSource = random) -> int:
        return backoff_delay_ms(
            self.strategy, attempt, self.base_delay_ms, self.max_delay_ms, self.jitter, rng
        )


def ceiling_ms(
    strategy: BackoffStrategy | str, attempt: int, base_delay_ms: int, max_delay_ms: int
) -> int:
    """The delay before jitter: the upper bound of what `backoff_delay_ms` can return."""
    if attempt < 1:
        raise ValidationError(f"attempt must be 1 or more, got {attempt}")
    if base_delay_ms < 0 or max_delay_ms < 0:
        raise ValidationError("backoff delays must not be negative")
    kind = BackoffStrategy(strategy)
    if kind is BackoffStrategy.FIXED:
        raw = base_delay_ms
    elif kind is BackoffStrategy.LINEAR:
        raw = base_delay_ms * attempt
    else:
        raw = base_delay_ms * (2 ** min(attempt - 1, _MAX_EXPONENT))
    return min(raw, max_delay_ms)


def backoff_delay_ms(
    strategy: BackoffStrategy | str,
    attempt: int,
    base_delay_ms: int,
    max_delay_ms: int,
    jitter: bool,
    rng: UniformSource = random,
) -> int:
    """Milliseconds to wait after failed attempt number `attempt` (1-based).

    fixed: base; linear: base * attempt; exponential: base * 2**(attempt-1). The result is
    clamped to `max_delay_ms`; with `jitter` it is then drawn uniformly from [0, clamped].
    """
    capped = ceiling_ms(strategy, attempt, base_delay_ms, max_delay_ms)
    if not jitter or capped == 0:
        return capped
    return int(rng.uniform(0, capped))
