"""Counters that limit how much a tenant may do per window, kept in PostgreSQL
(`rate_limit_buckets`, fixed windows keyed by name; SQL: `db/sql/quotas.sql`).

Each check is ONE statement: an upsert that starts a new window when the old one has expired,
and otherwise adds `cost` only if the total stays within the limit. A refused request therefore
consumes nothing (a bulk over the limit is refused whole and does not eat the quota of the
requests after it). Counters live on the primary key, so every API process, worker and
scheduler shares them and the row lock serialises concurrent checks of one key.

Used by the API (sign-in and auth limits, enqueue quotas), the scheduler (cron firings count
against the enqueue quotas) and the worker (`email.send`'s daily recipient quota).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from uuid import UUID

from codity.core.connection import Conn
from codity.db.queries import bind


@dataclass(frozen=True)
class Decision:
    allowed: bool
    count: int
    retry_after_s: float


async def _seconds_left(conn: Conn, key: str) -> tuple[int, float]:
    row = await bind("quota_peek", key=key).fetchrow(conn)
    if row is None:
        return 0, 0.0
    left = (row["expires_at"] - dt.datetime.now(dt.UTC)).total_seconds()
    return int(row["count"]), max(left, 0.0)


async def consume(conn: Conn, key: str, *, cost: int, limit: int, window_s: int) -> Decision:
    """Take `cost` units from `key`'s window if that keeps it within `limit`."""
    if cost > limit:  # can never fit, whatever the window holds
        return Decision(False, 0, float(window_s))
    row = await bind("quota_consume", key=key, cost=cost, limit=limit, window_s=window_s).fetchrow(
        conn
    )
    if row is not None:
        return Decision(True, int(row["count"]), 0.0)
    count, left = await _seconds_left(conn, key)
    return Decision(False, count, left)


async def refund(conn: Conn, key: str, *, cost: int = 1) -> None:
    """Give back units taken in the current window (an attempt that turned out not to count)."""
    await bind("quota_refund", key=key, cost=cost).execute(conn)


async def prune_expired(conn: Conn) -> int:
    """Delete windows that ended over a minute ago; returns how many were deleted."""
    status = await bind("quota_prune").execute(conn)
    return int(status.split()[-1])


def seconds_until_utc_midnight(now: dt.datetime | None = None) -> int:
    """The rest of today (UTC): the window of a per-day quota keyed by the date."""
    at = now or dt.datetime.now(dt.UTC)
    midnight = (at + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1, int((midnight - at).total_seconds()))


def email_recipients_key(project_id: UUID, now: dt.datetime | None = None) -> str:
    """The counter of a project's mail recipients today (UTC)."""
    day = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d")
    return f"email:project:{project_id}:{day}"


@dataclass(frozen=True)
class EnqueueLimits:
    """Jobs created or re-run per window: per project, and per organisation for all its
    projects together (RATE_LIMIT_ENQUEUE_PER_MINUTE and ..._ORG)."""

    per_project: int
    per_org: int
    window_s: int = 60


@dataclass(frozen=True)
class EnqueueRefusal:
    scope: str  # "project" or "organisation"
    limit: int
    decision: Decision


async def reserve_enqueues(
    conn: Conn, project_id: UUID, org_id: UUID, n: int, limits: EnqueueLimits
) -> EnqueueRefusal | None:
    """Reserve `n` jobs against the project's and the organisation's windows, both or neither;
    None when reserved, else which limit refused (nothing is then taken from either)."""
    project_key = f"enqueue:project:{project_id}"
    decision = await consume(
        conn, project_key, cost=n, limit=limits.per_project, window_s=limits.window_s
    )
    if not decision.allowed:
        return EnqueueRefusal("project", limits.per_project, decision)
    decision = await consume(
        conn, f"enqueue:org:{org_id}", cost=n, limit=limits.per_org, window_s=limits.window_s
    )
    if not decision.allowed:
        await refund(conn, project_key, cost=n)
        return EnqueueRefusal("organisation", limits.per_org, decision)
    return None
