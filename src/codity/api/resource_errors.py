"""Errors specific to the project resources, as members of the one `codity.domain.errors` tree.

Each subclass only narrows `code`, so a client can tell *which* id was unknown or *why* a
request conflicted; the API's exception handlers map them by their base class (404, 409, 422).
"""

from __future__ import annotations

from codity.domain.errors import ConflictError, NotFoundError, ValidationError


class ScheduleNotFoundError(NotFoundError):
    code = "schedule_not_found"


class DeadLetterNotFoundError(NotFoundError):
    code = "dead_letter_not_found"


class RetryPolicyNotFoundError(NotFoundError):
    code = "retry_policy_not_found"


class InvalidCursorError(ValidationError):
    code = "invalid_cursor"


class NameTakenError(ConflictError):
    """A queue, schedule or retry policy with that name already exists in its scope."""

    code = "name_taken"


class QueueBusyError(ConflictError):
    """A queue with jobs being executed right now cannot be deleted."""

    code = "queue_busy"
