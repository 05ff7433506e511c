"""Instants as whole microseconds since the Unix epoch, where the engine's hot statements pass them.

asyncpg builds a `datetime` for every timestamptz it decodes and converts every one it encodes
(about 6k instructions each way, a third of a claim reply's decoding), so the claim returns
run_at and the completion takes the handlers' start times as integers (db/sql/claim.sql,
outcomes.sql). The conversions are integer arithmetic, exact to the microsecond, which is
PostgreSQL's own resolution.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

UNIX_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US: Final = timedelta(microseconds=1)


def from_epoch_us(us: int) -> datetime:
    """The instant `us` microseconds after the Unix epoch (UTC)."""
    return UNIX_EPOCH + timedelta(microseconds=us)


def to_epoch_us(at: datetime) -> int:
    """Microseconds from the Unix epoch to `at`. A naive datetime is local time, as asyncpg
    reads one for a timestamptz."""
    if at.tzinfo is None:
        at = at.astimezone(UTC)
    return (at - UNIX_EPOCH) // _ONE_US


def to_epoch_us_each(times: list[datetime | None]) -> list[int | None]:
    """`to_epoch_us` of each (None stays None). A batch's times are mostly one object (a
    worker stamps every job of a claim with the same start time), converted once."""
    out: list[int | None] = []
    last: datetime | None = None
    last_us: int | None = None
    for at in times:
        if at is not last:
            last = at
            last_us = None if at is None else to_epoch_us(at)
        out.append(last_us)
    return out
