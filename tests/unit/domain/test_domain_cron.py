from __future__ import annotations

from datetime import UTC, datetime

import pytest

from codity.domain.cron import next_fire_time, next_fire_times, parse_cron
from codity.domain.errors import InvalidCronError

T0 = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)


def test_five_fields() -> None:
    assert next_fire_times("*/15 * * * *", "UTC", T0, 3) == [
        datetime(2026, 1, 1, 0, 15, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 30, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 45, tzinfo=UTC),
    ]


def test_six_fields_have_seconds_first() -> None:
    spec = parse_cron("30 * * * * *")
    assert spec.has_seconds
    assert spec.next_after(T0, 2) == [
        datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC),
    ]


def test_strictly_after() -> None:
    assert next_fire_time("0 * * * *", "UTC", T0) == datetime(2026, 1, 1, 1, tzinfo=UTC)


def test_timezone_follows_dst() -> None:
    # 09:00 in Paris is 08:00 UTC before the 29 March 2026 switch and 07:00 UTC after it.
    got = next_fire_times("0 9 * * *", "Europe/Paris", datetime(2026, 3, 28, tzinfo=UTC), 2)
    assert got == [datetime(2026, 3, 28, 8, tzinfo=UTC), datetime(2026, 3, 29, 7, tzinfo=UTC)]


def test_aliases() -> None:
    assert next_fire_time("@hourly", "UTC", T0) == datetime(2026, 1, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("", "empty"),
        ("* * *", "3 fields"),
        ("* * * * * * *", "7 fields"),
        ("61 * * * *", "invalid cron"),
        ("a b c d e", "invalid cron"),
        ("* * 30 2 *", "invalid cron"),
    ],
)
def test_invalid_expressions_say_why(expr: str, fragment: str) -> None:
    with pytest.raises(InvalidCronError, match=fragment):
        parse_cron(expr)


def test_unknown_timezone() -> None:
    with pytest.raises(InvalidCronError, match="unknown timezone"):
        parse_cron("* * * * *", "Mars/Olympus")


def test_naive_after_rejected() -> None:
    with pytest.raises(InvalidCronError, match="timezone-aware"):
        parse_cron("* * * * *").next_after(datetime(2026, 1, 1))
