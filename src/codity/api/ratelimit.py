"""Rate limits kept in PostgreSQL (no Redis): fixed windows in `rate_limit_buckets`.

Each check is ONE statement (`api_rate_limits_consume` in `db/sql/api_rate_limits.sql`): an upsert that starts a new window when the old one has expired,
and otherwise adds `cost` only if the total stays within the limit. A refused request therefore
consumes nothing (a bulk enqueue over the limit is refused whole and does not eat the quota of
the requests after it). Counters live on the primary key `key`, so concurrent API processes
share them and the row lock serialises concurrent checks of one key.

Limits (all from settings):
- LOGIN: failed sign-ins, per IP and per account, RATE_LIMIT_LOGIN_FAILURES per
  RATE_LIMIT_LOGIN_WINDOW_S. Each attempt is reserved as a failure before the password is
  checked and handed back on success. Once the limit is reached even a correct password gets
  429 until the window ends.
- AUTH: every call to /auth/* per IP, RATE_LIMIT_AUTH_PER_MINUTE.
- ENQUEUE: jobs per project per minute, RATE_LIMIT_ENQUEUE_PER_MINUTE (`check_enqueue_quota`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog

from codity.api.request_context import current_settings
from codity.db.queries import bind
from codity.domain.errors import RateLimitedError
from codity.settings import Settings

log = structlog.get_logger("codity.api.ratelimit")

#: How often each API process prunes expired windows.
PRUNE_INTERVAL_S = 300.0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    count: int
    retry_after_s: float


async def _seconds_left(pool: asyncpg.Pool[Any], key: str) -> tuple[int, float]:
    row = await bind("api_rate_limits_peek", key=key).fetchrow(pool)
    if row is None:
        return 0, 0.0
    left = (row["expires_at"] - dt.datetime.now(dt.UTC)).total_seconds()
    return int(row["count"]), max(left, 0.0)


async def consume(
    pool: asyncpg.Pool[Any], key: str, *, cost: int, limit: int, window_s: int
) -> Decision:
    """Take `cost` units from `key`'s window if that keeps it within `limit`."""
    if cost > limit:  # can never fit, whatever the window holds
        return Decision(False, 0, float(window_s))
    row = await bind(
        "api_rate_limits_consume", key=key, cost=cost, limit=limit, window_s=window_s
    ).fetchrow(pool)
    if row is not None:
        return Decision(True, int(row["count"]), 0.0)
    count, left = await _seconds_left(pool, key)
    return Decision(False, count, left)


async def refund(pool: asyncpg.Pool[Any], key: str, *, cost: int = 1) -> None:
    """Give back units taken in the current window (an attempt that turned out not to count)."""
    await bind("api_rate_limits_refund", key=key, cost=cost).execute(pool)


async def prune_expired(pool: asyncpg.Pool[Any]) -> int:
    """Delete windows that ended over a minute ago; returns how many were deleted."""
    status = await bind("api_rate_limits_prune").execute(pool)
    return int(status.split()[-1])


async def prune_forever(pool: asyncpg.Pool[Any], interval_s: float = PRUNE_INTERVAL_S) -> None:
    """Run by the API's lifespan. Errors are logged and retried next round (never fatal)."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await prune_expired(pool)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("rate_limit_prune_failed", error=str(exc))


# --- the named limits -------------------------------------------------------------------------


def login_failure_keys(ip: str | None, email: str) -> tuple[str, str]:
    return f"login-fail:ip:{ip or 'unknown'}", f"login-fail:account:{email.lower()}"


async def reserve_login_attempt(
    pool: asyncpg.Pool[Any], settings: Settings, *, ip: str | None, email: str
) -> None:
    """Count this sign-in as a failure up front, per IP and per account, or raise 429.

    Reserving before the password is checked (instead of checking, verifying, then recording)
    means parallel guesses cannot all slip in before the first failure is written: at most
    RATE_LIMIT_LOGIN_FAILURES attempts per window get as far as the password check. A
    successful sign-in hands its reservation back (`release_login_attempt`).
    """
    taken: list[str] = []
    for key in login_failure_keys(ip, email):
        decision = await consume(
            pool,
            key,
            cost=1,
            limit=settings.rate_limit_login_failures,
            window_s=settings.rate_limit_login_window_s,
        )
        if not decision.allowed:
            for done in taken:
                await refund(pool, done)
            raise RateLimitedError(
                "too many failed sign-in attempts: try again later",
                retry_after_s=decision.retry_after_s,
            )
        taken.append(key)


async def release_login_attempt(pool: asyncpg.Pool[Any], *, ip: str | None, email: str) -> None:
    """The attempt succeeded: it is not a failure after all."""
    for key in login_failure_keys(ip, email):
        await refund(pool, key)


async def check_auth_ceiling(pool: asyncpg.Pool[Any], settings: Settings, ip: str | None) -> None:
    decision = await consume(
        pool,
        f"auth:ip:{ip or 'unknown'}",
        cost=1,
        limit=settings.rate_limit_auth_per_minute,
        window_s=60,
    )
    if not decision.allowed:
        raise RateLimitedError(
            "too many authentication requests: try again later",
            retry_after_s=decision.retry_after_s,
        )


async def check_enqueue_quota(
    pool: asyncpg.Pool[Any],
    project_id: uuid.UUID,
    n: int,
    *,
    limit: int | None = None,
    window_s: int = 60,
) -> None:
    """Reserve `n` enqueues for the project in this minute, or raise 429 reserving nothing.

    Call it BEFORE writing any job, with the whole request's count: a bulk that would go over
    the limit is refused whole, so nothing past the limit is ever stored. `limit` defaults to
    the serving app's RATE_LIMIT_ENQUEUE_PER_MINUTE.
    """
    if limit is None:
        limit = current_settings().rate_limit_enqueue_per_minute
    decision = await consume(
        pool, f"enqueue:project:{project_id}", cost=n, limit=limit, window_s=window_s
    )
    if not decision.allowed:
        raise RateLimitedError(
            f"enqueue limit reached: at most {limit} jobs per minute per project",
            retry_after_s=decision.retry_after_s,
            details={"limit": limit, "requested": n, "used": decision.count},
        )
