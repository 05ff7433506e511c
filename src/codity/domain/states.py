"""The enumerations the database stores as native enums, and the job lifecycle.

The allowed-map is the single statement of which status may follow which. Python code calls
`assert_transition` before a state change; the database enforces the same map with a trigger
(see the initial migration) so a hand-written UPDATE cannot break it either.
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType
from typing import Final

from codity.domain.errors import IllegalTransitionError


class JobStatus(StrEnum):
    WAITING = "waiting"  # blocked on dependencies that have not completed yet
    SCHEDULED = "scheduled"  # delayed: run_at is in the future (delay, backoff, cron)
    QUEUED = "queued"  # claimable now
    CLAIMED = "claimed"  # leased by a worker, handler not started yet
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"  # an attempt failed; transient on the way to scheduled or dead_letter
    DEAD_LETTER = "dead_letter"
    CANCELLED = "cancelled"


class MemberRole(StrEnum):
    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"


class BackoffStrategy(StrEnum):
    FIXED = "fixed"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"


class WorkerStatus(StrEnum):
    ACTIVE = "active"
    DRAINING = "draining"
    STOPPED = "stopped"
    DEAD = "dead"


class ExecutionStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"  # lease expired: the worker vanished; the attempt is refunded
    RELEASED = "released"  # graceful drain gave the job back; the attempt is refunded
    CANCELLED = "cancelled"


J = JobStatus

#: Which status may follow which. Frozen: nothing at run time can widen it.
ALLOWED_TRANSITIONS: Final[MappingProxyType[JobStatus, frozenset[JobStatus]]] = MappingProxyType(
    {
        J.WAITING: frozenset({J.QUEUED, J.SCHEDULED, J.CANCELLED}),
        J.SCHEDULED: frozenset({J.QUEUED, J.CANCELLED}),
        J.QUEUED: frozenset({J.CLAIMED, J.SCHEDULED, J.CANCELLED}),
        J.CLAIMED: frozenset(
            {J.RUNNING, J.QUEUED, J.COMPLETED, J.FAILED, J.SCHEDULED, J.DEAD_LETTER, J.CANCELLED}
        ),
        J.RUNNING: frozenset(
            {J.COMPLETED, J.FAILED, J.QUEUED, J.SCHEDULED, J.DEAD_LETTER, J.CANCELLED}
        ),
        J.FAILED: frozenset({J.SCHEDULED, J.QUEUED, J.DEAD_LETTER}),
        J.DEAD_LETTER: frozenset({J.QUEUED}),
        J.COMPLETED: frozenset(),
        J.CANCELLED: frozenset({J.QUEUED}),
    }
)

TERMINAL_STATUSES: Final = frozenset({J.COMPLETED, J.DEAD_LETTER, J.CANCELLED})
LEASED_STATUSES: Final = frozenset({J.CLAIMED, J.RUNNING})


def can_transition(current: JobStatus, target: JobStatus) -> bool:
    return target in ALLOWED_TRANSITIONS[current]


def assert_transition(current: JobStatus, target: JobStatus) -> None:
    if not can_transition(current, target):
        raise IllegalTransitionError(current.value, target.value)
