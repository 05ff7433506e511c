"""The API's rate limits, on the counters of `codity.core.quotas` (fixed windows in
PostgreSQL, no Redis: one statement per check, a refused request consumes nothing, shared by
every API process).

Limits (all from settings):
- LOGIN: failed sign-ins per IP (IPv6: per /64), RATE_LIMIT_LOGIN_FAILURES per
  RATE_LIMIT_LOGIN_WINDOW_S; per account, a progressive delay after as many failures (up to
  LOGIN_MAX_DELAY_S), never a lock-out. Each attempt is reserved as a failure before the
  password is checked and handed back on success.
- AUTH: every call to /auth/* per IP (IPv6: per /64), RATE_LIMIT_AUTH_PER_MINUTE.
- ENQUEUE: jobs created or re-run per minute, per project (RATE_LIMIT_ENQUEUE_PER_MINUTE) and
  per organisation (RATE_LIMIT_ENQUEUE_PER_MINUTE_ORG) (`check_enqueue_quota`); the scheduler
  counts cron firings against the same windows (`core.materialise_cron`).
"""

from __future__ import annotations

import ipaddress
import uuid
from typing import Any

import asyncpg

from codity.api.request_context import current_settings
from codity.core import quotas
from codity.core.loop_service import LoopService
from codity.db.queries import bind
from codity.domain.errors import RateLimitedError
from codity.settings import Settings

#: How often each API process prunes expired windows.
PRUNE_INTERVAL_S = 300.0


async def consume(
    pool: asyncpg.Pool[Any], key: str, *, cost: int, limit: int, window_s: int
) -> quotas.Decision:
    """Take `cost` units from `key`'s window if that keeps it within `limit`."""
    return await quotas.consume(pool, key, cost=cost, limit=limit, window_s=window_s)


async def refund(pool: asyncpg.Pool[Any], key: str, *, cost: int = 1) -> None:
    await quotas.refund(pool, key, cost=cost)


async def prune_expired(pool: asyncpg.Pool[Any]) -> int:
    """Delete windows that ended over a minute ago (and sign-in throttles idle for a day);
    returns how many windows were deleted."""
    await bind("api_login_throttle_prune").execute(pool)
    return await quotas.prune_expired(pool)


class WindowPruner(LoopService):
    """Run by the API's lifespan: prunes expired windows every PRUNE_INTERVAL_S. A failed round
    is the loop service's to survive (an outage waited out, anything else logged), never
    fatal to the API."""

    name = "rate-limit-pruner"

    def __init__(self, pool: asyncpg.Pool[Any], *, interval_s: float = PRUNE_INTERVAL_S) -> None:
        super().__init__(pool, interval_ms=int(interval_s * 1000))

    async def run_once(self) -> bool:
        await prune_expired(self.conn)
        return False


# --- the named limits -------------------------------------------------------------------------


def client_key(ip: str | None) -> str:
    """What per-IP limits count: the address, or for IPv6 its /64 (one subscriber usually holds
    a whole /64, so per-address limits would let them rotate through 2^64 buckets)."""
    if ip is None:
        return "unknown"
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def _ip_key(ip: str | None) -> str:
    return f"login-fail:ip:{client_key(ip)}"


def _account_key(email: str) -> str:
    return f"login:{email.lower()}"


async def reserve_login_attempt(
    pool: asyncpg.Pool[Any], settings: Settings, *, ip: str | None, email: str
) -> None:
    """Count this sign-in as a failure up front, per IP and per account, or raise 429.

    - Per IP (IPv6: per /64): at most RATE_LIMIT_LOGIN_FAILURES failures per
      RATE_LIMIT_LOGIN_WINDOW_S. One source cannot guess on and on.
    - Per account: a progressive delay (`api_login_throttle_reserve`): after
      RATE_LIMIT_LOGIN_FAILURES failures each further one doubles the wait before the next
      attempt, up to LOGIN_MAX_DELAY_S. Distributed guessing against one account is slowed to
      one guess per delay, but nobody can lock the owner out: once the delay has passed, the
      right password works.

    Reserving before the password is checked (instead of checking, verifying, then recording)
    means parallel guesses cannot slip in before the failure is written. A successful sign-in
    hands its reservation back (`release_login_attempt`).
    """
    decision = await consume(
        pool,
        _ip_key(ip),
        cost=1,
        limit=settings.rate_limit_login_failures,
        window_s=settings.rate_limit_login_window_s,
    )
    if not decision.allowed:
        raise RateLimitedError(
            "too many failed sign-in attempts from this address: try again later",
            retry_after_s=decision.retry_after_s,
        )
    account = _account_key(email)
    reserved = await bind(
        "api_login_throttle_reserve",
        account=account,
        free=settings.rate_limit_login_failures,
        max_delay_s=settings.login_max_delay_s,
        window_s=settings.rate_limit_login_window_s,
    ).fetchval(pool)
    if reserved is None:
        await refund(pool, _ip_key(ip))
        wait = await bind("api_login_throttle_wait", account=account).fetchval(pool)
        raise RateLimitedError(
            "too many failed sign-in attempts for this account: wait a moment and try again",
            retry_after_s=float(wait or 1),
        )


async def release_login_attempt(pool: asyncpg.Pool[Any], *, ip: str | None, email: str) -> None:
    """The attempt succeeded: it is not a failure after all, and the account's delay ends."""
    await refund(pool, _ip_key(ip))
    await bind("api_login_throttle_clear", account=_account_key(email)).execute(pool)


async def check_auth_ceiling(pool: asyncpg.Pool[Any], settings: Settings, ip: str | None) -> None:
    decision = await consume(
        pool,
        f"auth:ip:{client_key(ip)}",
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
    org_id: uuid.UUID,
    n: int,
    *,
    limit: int | None = None,
    org_limit: int | None = None,
    window_s: int = 60,
) -> None:
    """Reserve `n` jobs for the project and its organisation in this minute, or raise 429
    reserving nothing.

    Call it BEFORE writing any job, with the whole request's count: a bulk that would go over
    either limit is refused whole, so nothing past a limit is ever stored. Everything that
    creates or re-runs jobs calls it: enqueue (one, bulk), trigger, retry, replay. The limits
    default to the serving app's RATE_LIMIT_ENQUEUE_PER_MINUTE and ..._ORG.
    """
    settings = current_settings()
    limits = quotas.EnqueueLimits(
        per_project=settings.rate_limit_enqueue_per_minute if limit is None else limit,
        per_org=settings.rate_limit_enqueue_per_minute_org if org_limit is None else org_limit,
        window_s=window_s,
    )
    refused = await quotas.reserve_enqueues(pool, project_id, org_id, n, limits)
    if refused is not None:
        raise RateLimitedError(
            f"enqueue limit reached: at most {refused.limit} jobs per minute per {refused.scope}",
            retry_after_s=refused.decision.retry_after_s,
            details={
                "scope": refused.scope,
                "limit": refused.limit,
                "requested": n,
                "used": refused.decision.count,
            },
        )
