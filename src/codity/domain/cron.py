"""Cron expressions: parsing with clear errors and timezone-aware next fire times.

Accepted forms: the standard 5 fields (minute hour day-of-month month day-of-week), 6 fields
with SECONDS FIRST (second minute hour day-of-month month day-of-week, as Quartz and
node-cron write it), and croniter's `@hourly`-style aliases. Fire times are computed in the
schedule's own timezone (so "09:00 every day" stays 09:00 across DST changes) and returned in UTC.
croniter does the calendar arithmetic; this module owns validation and the field convention.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from codity.domain.errors import InvalidCronError

_ALIASES = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)


@dataclass(frozen=True)
class CronSpec:
    expression: str
    timezone: str
    has_seconds: bool

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def next_after(self, after: datetime, n: int = 1) -> list[datetime]:
        """The next `n` fire times strictly after `after`, in UTC."""
        if after.tzinfo is None:
            raise InvalidCronError("`after` must be timezone-aware")
        if n < 0:
            raise InvalidCronError(f"n must not be negative, got {n}")
        it = croniter(
            self.expression,
            after.astimezone(self.zone),
            ret_type=datetime,
            second_at_beginning=self.has_seconds,
        )
        return [it.get_next(datetime).astimezone(UTC) for _ in range(n)]


def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidCronError(
            f"unknown timezone {tz!r}: use an IANA name such as 'UTC' or 'Europe/Paris'",
            details={"timezone": tz},
        ) from exc


def parse_cron(expr: str, tz: str = "UTC") -> CronSpec:
    """Validate `expr` in timezone `tz`; raises `InvalidCronError` saying what is wrong."""
    text = " ".join(expr.split()) if isinstance(expr, str) else ""
    if not text:
        raise InvalidCronError("cron expression is empty", details={"expression": expr})
    _zone(tz)
    fields = text.split(" ")
    if len(fields) == 1 and text.lower() in _ALIASES:
        has_seconds = False
        text = text.lower()
    elif len(fields) in (5, 6):
        has_seconds = len(fields) == 6
    else:
        raise InvalidCronError(
            f"cron expression {expr!r} has {len(fields)} fields; expected 5 "
            "(minute hour day month weekday) or 6 with seconds first",
            details={"expression": expr},
        )
    try:
        # Constructing and stepping once catches both syntax errors and impossible dates (30 Feb).
        croniter(
            text,
            datetime(2000, 1, 1, tzinfo=UTC),
            ret_type=datetime,
            second_at_beginning=has_seconds,
            max_years_between_matches=50,
        ).get_next(datetime)
    except (CroniterError, ValueError, KeyError, TypeError) as exc:
        raise InvalidCronError(
            f"invalid cron expression {expr!r}: {exc}", details={"expression": expr}
        ) from exc
    return CronSpec(expression=text, timezone=tz, has_seconds=has_seconds)


def next_fire_times(expr: str, tz: str, after: datetime, n: int = 1) -> list[datetime]:
    """The next `n` fire times of `expr` (in timezone `tz`) strictly after `after`, in UTC."""
    return parse_cron(expr, tz).next_after(after, n)


def next_fire_time(expr: str, tz: str, after: datetime) -> datetime:
    return next_fire_times(expr, tz, after, 1)[0]


#: Fire times sampled to find a schedule's shortest interval: enough to cover every field's
#: steps within an hour for a seconds schedule, and a day's worth of minute steps otherwise.
INTERVAL_SAMPLES = 400


def shortest_interval_s(spec: CronSpec, after: datetime) -> float:
    """The smallest gap, in seconds, between consecutive fire times over the next
    INTERVAL_SAMPLES firings: how often the schedule can fire at its fastest."""
    times = spec.next_after(after, INTERVAL_SAMPLES)
    return min((b - a).total_seconds() for a, b in pairwise(times))


def check_min_interval(spec: CronSpec, min_interval_s: int, after: datetime) -> None:
    """InvalidCronError when `spec` can fire more often than every `min_interval_s` seconds
    (CRON_MIN_INTERVAL_S): `* * * * * *` would enqueue a job every second, a quota walked
    around by a single schedule."""
    if min_interval_s <= 1:
        return
    fastest = shortest_interval_s(spec, after)
    if fastest < min_interval_s:
        raise InvalidCronError(
            f"this schedule can fire every {fastest:g} s; the minimum interval here is "
            f"{min_interval_s} s (CRON_MIN_INTERVAL_S)",
            details={"shortest_interval_s": fastest, "min_interval_s": min_interval_s},
        )
