"""The one exception tree. Every error codity raises on purpose is a `CodityError`.

Each class carries a stable machine-readable `code` (the API puts it in the error envelope,
the CLI prints it) and a message written for the person who will read it.
"""

from __future__ import annotations

from typing import Any


class CodityError(Exception):
    code = "codity_error"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class ConfigurationError(CodityError):
    code = "configuration_error"


class DatabaseUnavailableError(CodityError):
    code = "database_unavailable"


class ValidationError(CodityError):
    code = "validation_error"


class PayloadTooLargeError(ValidationError):
    code = "payload_too_large"


class NotFoundError(CodityError):
    code = "not_found"


class QueueNotFoundError(NotFoundError):
    code = "queue_not_found"


class JobNotFoundError(NotFoundError):
    code = "job_not_found"


class ConflictError(CodityError):
    code = "conflict"


class IllegalTransitionError(ConflictError):
    code = "illegal_transition"

    def __init__(self, current: str, target: str) -> None:
        super().__init__(
            f"a job cannot go from {current!r} to {target!r}",
            details={"from": current, "to": target},
        )


class LeaseLostError(ConflictError):
    """A fenced write matched no row: this worker no longer holds the job's lease."""

    code = "lease_lost"


class InvalidCronError(ValidationError):
    code = "invalid_cron"
