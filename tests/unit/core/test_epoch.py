"""codity.core.epoch: instants as microseconds since the Unix epoch, exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from codity.core.epoch import UNIX_EPOCH, from_epoch_us, to_epoch_us, to_epoch_us_each


@pytest.mark.parametrize(
    "at",
    [
        UNIX_EPOCH,
        datetime(2026, 12, 7, 12, 34, 56, 789_123, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2255, 6, 1, 0, 0, 0, 1, tzinfo=UTC),
        datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    ],
)
def test_a_round_trip_is_exact(at: datetime) -> None:
    assert from_epoch_us(to_epoch_us(at)) == at


def test_an_offset_counts_from_the_same_instant() -> None:
    at = datetime(2026, 12, 7, 13, 0, 0, 5, tzinfo=timezone(timedelta(hours=1)))
    assert to_epoch_us(at) == to_epoch_us(datetime(2026, 12, 7, 12, 0, 0, 5, tzinfo=UTC))


def test_a_naive_datetime_is_local_time_as_the_driver_reads_it() -> None:
    naive = datetime(2026, 12, 7, 12, 0)
    assert to_epoch_us(naive) == to_epoch_us(naive.astimezone(UTC))


def test_each_converts_every_value_and_keeps_none() -> None:
    a = datetime(2026, 1, 1, tzinfo=UTC)
    b = a + timedelta(microseconds=3)
    assert to_epoch_us_each([a, a, None, b, a]) == [
        to_epoch_us(a),
        to_epoch_us(a),
        None,
        to_epoch_us(a) + 3,
        to_epoch_us(a),
    ]
