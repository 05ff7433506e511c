"""Flow control vocabulary: unique-job defaults and keys, the limits' bounds, explain's codes.

Pure: no I/O. The mechanisms live in the claim (db/sql/claim.sql) and in enqueue
(core/enqueue.py); docs/CONCURRENCY.md describes them and names the tests behind each.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from codity.domain.states import JobStatus

#: Longest `concurrency_key` / `unique_key` accepted (like idempotency keys).
MAX_FLOW_KEY_LEN: Final = 255
#: A unique window longer than a year is almost certainly a unit mistake.
MAX_UNIQUE_FOR_S: Final = 366 * 24 * 3600.0
#: The longest rate-limit period: a day.
MAX_RATE_PERIOD_S: Final = 24 * 3600.0
#: The shortest: a millisecond is the resolution periods are stored in.
MIN_RATE_PERIOD_S: Final = 0.001

#: What a unique enqueue matches unless it names `unique_states`: a job not finished yet.
UNFINISHED_STATES: Final = (
    JobStatus.WAITING,
    JobStatus.SCHEDULED,
    JobStatus.QUEUED,
    JobStatus.CLAIMED,
    JobStatus.RUNNING,
)


def default_unique_key(handler: str, payload: Any) -> str:
    """The unique key of a job that names none: a hash of its handler and payload.

    The payload is encoded canonically (sorted keys, no spaces), so two payloads that are equal
    as JSON objects give the same key whatever order their keys were written in.
    """
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)
    digest = hashlib.sha256(f"{handler}\n{canonical}".encode()).hexdigest()
    return f"sha256:{digest}"


class Blocker(StrEnum):
    """Why a job is not running (GET .../jobs/{id}/explain); `claimable` when nothing blocks."""

    QUEUE_PAUSED = "queue_paused"
    SCHEDULED = "scheduled"
    WAITING_ON_DEPENDENCIES = "waiting_on_dependencies"
    CONCURRENCY_LIMIT_FULL = "concurrency_limit_full"
    KEY_LIMIT_FULL = "key_limit_full"
    RATE_LIMITED = "rate_limited"
    FAIR_SHARE = "fair_share"
    NO_LIVE_WORKER = "no_live_worker"
    HANDLER_NOT_REGISTERED = "handler_not_registered"
    CLAIMABLE = "claimable"


# --- explain: the claim's rules, applied to one job's facts ------------------------------------


@dataclass(frozen=True)
class ExplainFacts:
    """What `GET .../jobs/{id}/explain` reads about a job (api_jobs_explain)."""

    status: JobStatus
    run_at: datetime
    now: datetime
    handler: str
    concurrency_key: str | None
    is_paused: bool
    concurrency_limit: int | None
    key_concurrency_limit: int | None
    rate_limit_count: int | None
    rate_limit_period_ms: int | None
    rate_limit_per_key: bool
    weight: int
    waiting_on: list[int]
    queue_leased: int
    queue_holders: list[int]
    key_leased: int
    key_holders: list[int]
    rate_used: int | None
    rate_next_at: datetime | None
    ahead: int
    live_workers: int
    workers_with_handler: int
    live_capacity: int
    #: Leased jobs per project on the live workers serving the queue: {own, in_flight, weight}.
    in_flight_by_project: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    code: Blocker
    message: str
    data: dict[str, Any] = field(default_factory=dict)


_PENDING = frozenset({JobStatus.WAITING, JobStatus.SCHEDULED, JobStatus.QUEUED})


def explain(f: ExplainFacts) -> list[Finding]:
    """Every reason the job is not running now, or [claimable] when nothing holds it back.

    A job that runs or has finished has nothing to explain: []. The limits (concurrency, key,
    rate, fair share) are checked only for a queued job: for a waiting or scheduled one they
    say nothing about when it will run.
    """
    if f.status not in _PENDING:
        return []
    found: list[Finding] = []
    if f.status is JobStatus.WAITING:
        found.append(
            Finding(
                Blocker.WAITING_ON_DEPENDENCIES,
                f"waits for {len(f.waiting_on)} job(s) to complete",
                {"job_ids": f.waiting_on},
            )
        )
    if f.status is JobStatus.SCHEDULED or (f.status is JobStatus.WAITING and f.run_at > f.now):
        found.append(Finding(Blocker.SCHEDULED, "not due yet", {"run_at": f.run_at.isoformat()}))
    if f.is_paused:
        found.append(Finding(Blocker.QUEUE_PAUSED, "its queue is paused"))
    if f.live_workers == 0:
        found.append(Finding(Blocker.NO_LIVE_WORKER, "no live worker serves its queue"))
    elif f.workers_with_handler == 0:
        found.append(
            Finding(
                Blocker.HANDLER_NOT_REGISTERED,
                f"no live worker serving its queue runs the handler {f.handler!r}",
                {"handler": f.handler, "live_workers": f.live_workers},
            )
        )
    if f.status is JobStatus.QUEUED:
        found.extend(_limits(f))
    if not found:
        found.append(
            Finding(
                Blocker.CLAIMABLE,
                "nothing holds it back: the next free slot takes it",
                {"ahead": f.ahead},
            )
        )
    return found


def _limits(f: ExplainFacts) -> list[Finding]:
    found: list[Finding] = []
    if f.concurrency_limit is not None and f.queue_leased >= f.concurrency_limit:
        found.append(
            Finding(
                Blocker.CONCURRENCY_LIMIT_FULL,
                f"its queue runs {f.queue_leased} of {f.concurrency_limit} jobs at once",
                {
                    "limit": f.concurrency_limit,
                    "running": f.queue_leased,
                    "job_ids": f.queue_holders,
                },
            )
        )
    if (
        f.concurrency_key is not None
        and f.key_concurrency_limit is not None
        and f.key_leased >= f.key_concurrency_limit
    ):
        found.append(
            Finding(
                Blocker.KEY_LIMIT_FULL,
                f"{f.key_leased} of {f.key_concurrency_limit} jobs with key "
                f"{f.concurrency_key!r} already run",
                {
                    "key": f.concurrency_key,
                    "limit": f.key_concurrency_limit,
                    "running": f.key_leased,
                    "job_ids": f.key_holders,
                },
            )
        )
    if (
        f.rate_limit_count is not None
        and f.rate_used is not None
        and f.rate_used >= f.rate_limit_count
    ):
        found.append(
            Finding(
                Blocker.RATE_LIMITED,
                f"{f.rate_used} of {f.rate_limit_count} starts in the last "
                f"{(f.rate_limit_period_ms or 0) / 1000:g} s",
                {
                    "count": f.rate_limit_count,
                    "period_s": (f.rate_limit_period_ms or 0) / 1000,
                    "per_key": f.rate_limit_per_key,
                    "next_slot_at": f.rate_next_at.isoformat() if f.rate_next_at else None,
                },
            )
        )
    others = [p for p in f.in_flight_by_project if not p.get("own")]
    busy = sum(int(p["in_flight"]) for p in f.in_flight_by_project)
    if f.live_capacity > 0 and busy >= f.live_capacity and any(p["in_flight"] for p in others):
        own = next((int(p["in_flight"]) for p in f.in_flight_by_project if p.get("own")), 0)
        found.append(
            Finding(
                Blocker.FAIR_SHARE,
                "every slot of the workers serving its queue is taken; other projects hold "
                f"{busy - own} of {f.live_capacity}",
                {
                    "own": {"in_flight": own, "weight": f.weight},
                    "others": [
                        {"in_flight": int(p["in_flight"]), "weight": int(p["weight"])}
                        for p in others
                    ],
                    "capacity": f.live_capacity,
                },
            )
        )
    return found
