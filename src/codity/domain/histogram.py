"""Duration histograms with log-spaced buckets: the shape the per-minute rollups store.

Percentiles cannot be averaged across minutes, but histograms can be added: a chart over 24 h
or 7 d sums the stored bucket counts and reads p50/p95 from the sum. 40 buckets spread evenly
on a log scale between 1 ms and 1 h make each bucket about 45% wider than the one below, so a
percentile read from a histogram is within that factor of the exact one (it reports the
bucket's geometric middle). Bucket 0 holds everything under 1 ms, the last one everything
from 1 h up. The rollup SQL computes the index with `width_bucket(ln(ms), ln(MIN), ln(MAX),
BUCKETS)` using these same constants, passed as parameters.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

#: Lower edge of bucket 1, in milliseconds.
MIN_MS = 1.0
#: Upper edge of the last regular bucket: one hour.
MAX_MS = 3_600_000.0
#: Regular buckets between MIN_MS and MAX_MS; plus one below and one above.
BUCKETS = 40
#: Length of a stored histogram array.
SLOTS = BUCKETS + 2

_LOG_MIN = math.log(MIN_MS)
_LOG_STEP = (math.log(MAX_MS) - _LOG_MIN) / BUCKETS


def bucket_of(ms: float) -> int:
    """The slot a duration falls in (the Python mirror of the SQL width_bucket call)."""
    if ms < MIN_MS:
        return 0
    if ms >= MAX_MS:
        return BUCKETS + 1
    return min(BUCKETS, int((math.log(ms) - _LOG_MIN) / _LOG_STEP) + 1)


def bucket_bounds(slot: int) -> tuple[float, float]:
    """[low, high) of a slot, in milliseconds."""
    if slot <= 0:
        return 0.0, MIN_MS
    if slot > BUCKETS:
        return MAX_MS, math.inf
    low = math.exp(_LOG_MIN + (slot - 1) * _LOG_STEP)
    return low, math.exp(_LOG_MIN + slot * _LOG_STEP)


def representative(slot: int) -> float:
    """The value reported for a slot: its geometric middle (its edge for the open ends)."""
    low, high = bucket_bounds(slot)
    if slot <= 0:
        return MIN_MS
    if math.isinf(high):
        return MAX_MS
    return math.sqrt(low * high)


def empty() -> list[int]:
    return [0] * SLOTS


def from_counts(counts: Iterable[tuple[int, int]]) -> list[int]:
    """A histogram from (slot, count) pairs; slots out of range are clamped."""
    hist = empty()
    for slot, n in counts:
        hist[max(0, min(SLOTS - 1, slot))] += n
    return hist


def merge(histograms: Iterable[Sequence[int]]) -> list[int]:
    total = empty()
    for hist in histograms:
        for i, n in enumerate(hist[:SLOTS]):
            total[i] += n
    return total


def percentile(hist: Sequence[int], q: float) -> float | None:
    """The q-quantile (0 < q <= 1) read from a histogram; None when it holds no sample."""
    total = sum(hist)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for slot, n in enumerate(hist):
        seen += n
        if n and seen >= rank:
            return round(representative(slot), 3)
    return round(representative(len(hist) - 1), 3)
