"""The one exception tree. Every error codity raises on purpose is a `CodityError`.

Each class carries a stable machine-readable `code` (the API puts it in the error envelope,
the CLI prints it) and a message written for the person who will read it. The API answers
each family with one HTTP status (`codity.api.errors.status_for`); a subclass only narrows the
`code`, so a client can tell *which* id was unknown or *why* a request conflicted.

    CodityError                         codity_error
    ├── ConfigurationError              configuration_error      500
    ├── DatabaseUnavailableError        database_unavailable     503
    ├── ValidationError                 validation_error         422
    │   ├── PayloadTooLargeError        payload_too_large        413
    │   ├── InvalidCronError            invalid_cron
    │   ├── InvalidCursorError          invalid_cursor
    │   ├── InvalidVerificationTokenError  invalid_verification_token
    │   └── InvalidInvitationError      invalid_invitation
    ├── NotFoundError                   not_found                404
    │   ├── ProjectNotFoundError        project_not_found
    │   ├── QueueNotFoundError          queue_not_found
    │   ├── JobNotFoundError            job_not_found
    │   ├── ScheduleNotFoundError       schedule_not_found
    │   ├── DeadLetterNotFoundError     dead_letter_not_found
    │   ├── RetryPolicyNotFoundError    retry_policy_not_found
    │   ├── ApiKeyNotFoundError         api_key_not_found
    │   ├── MemberNotFoundError         member_not_found
    │   ├── OrgNotFoundError            org_not_found
    │   └── InvitationNotFoundError     invitation_not_found
    ├── ConflictError                   conflict                 409
    │   ├── IllegalTransitionError      illegal_transition
    │   ├── LeaseLostError              lease_lost
    │   ├── NameTakenError              name_taken
    │   ├── SlugTakenError              slug_taken
    │   ├── QueueBusyError              queue_busy
    │   ├── QueueDrainingError          queue_draining
    │   ├── EmailTakenError             email_taken
    │   ├── AlreadyMemberError          already_member
    │   ├── LastOwnerError              last_owner
    │   └── QuotaExceededError          quota_exceeded
    ├── UnauthorizedError               unauthorized             401
    │   ├── InvalidCredentialsError     invalid_credentials
    │   ├── InvalidRefreshTokenError    invalid_refresh_token
    │   ├── RefreshTokenReusedError     refresh_token_reused
    │   └── SessionRevokedError         session_revoked
    ├── ForbiddenError                  forbidden                403
    │   ├── CsrfError                   csrf_failed
    │   └── EmailNotVerifiedError       email_not_verified
    └── RateLimitedError                rate_limited             429  (+ Retry-After)

Not-found errors never say whether the thing exists elsewhere: an id of another tenant is
simply "not found", so ids cannot be probed.
"""

from __future__ import annotations

import math
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


# --- 422: the request cannot be carried out as given ------------------------------------------


class ValidationError(CodityError):
    code = "validation_error"


class PayloadTooLargeError(ValidationError):
    code = "payload_too_large"


class InvalidCronError(ValidationError):
    code = "invalid_cron"


class InvalidCursorError(ValidationError):
    """A pagination cursor that `codity.api.pagination` did not make."""

    code = "invalid_cursor"


class InvalidVerificationTokenError(ValidationError):
    """An email verification link that is forged, expired or already used."""

    code = "invalid_verification_token"


class InvalidInvitationError(ValidationError):
    """An invitation token that is unknown, expired, revoked, used, or for another email."""

    code = "invalid_invitation"


# --- 404: unknown here (which includes "belongs to another tenant") ---------------------------


class NotFoundError(CodityError):
    code = "not_found"


class ProjectNotFoundError(NotFoundError):
    code = "project_not_found"


class QueueNotFoundError(NotFoundError):
    code = "queue_not_found"


class JobNotFoundError(NotFoundError):
    code = "job_not_found"


class ScheduleNotFoundError(NotFoundError):
    code = "schedule_not_found"


class DeadLetterNotFoundError(NotFoundError):
    code = "dead_letter_not_found"


class BulkActionNotFoundError(NotFoundError):
    code = "bulk_action_not_found"


class RetryPolicyNotFoundError(NotFoundError):
    code = "retry_policy_not_found"


class ApiKeyNotFoundError(NotFoundError):
    code = "api_key_not_found"


class MemberNotFoundError(NotFoundError):
    code = "member_not_found"


class OrgNotFoundError(NotFoundError):
    code = "org_not_found"


class InvitationNotFoundError(NotFoundError):
    code = "invitation_not_found"


# --- 409: the current state refuses the change ------------------------------------------------


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


class NameTakenError(ConflictError):
    """A queue, schedule or retry policy with that name already exists in its scope."""

    code = "name_taken"


class SlugTakenError(ConflictError):
    code = "slug_taken"


class QueueBusyError(ConflictError):
    """A queue with jobs being executed right now cannot be deleted."""

    code = "queue_busy"


class QueueDrainingError(ConflictError):
    """A draining queue takes no new jobs: it finishes what it has, then pauses itself."""

    code = "queue_draining"


class EmailTakenError(ConflictError):
    code = "email_taken"


class AlreadyMemberError(ConflictError):
    code = "already_member"


class LastOwnerError(ConflictError):
    code = "last_owner"


# --- 401 / 403 / 429: who is calling, and how often -------------------------------------------


class UnauthorizedError(CodityError):
    """No valid credentials: sign in (again) or send a valid API key."""

    code = "unauthorized"


class InvalidCredentialsError(UnauthorizedError):
    code = "invalid_credentials"


class InvalidRefreshTokenError(UnauthorizedError):
    code = "invalid_refresh_token"


class RefreshTokenReusedError(UnauthorizedError):
    code = "refresh_token_reused"


class SessionRevokedError(UnauthorizedError):
    """The access token predates a password change or a "sign out everywhere"."""

    code = "session_revoked"


class ForbiddenError(CodityError):
    """Authenticated, but the role (or the kind of credential) does not allow this."""

    code = "forbidden"


class CsrfError(ForbiddenError):
    """A call carried by the refresh cookie without the matching `X-CSRF-Token` header."""

    code = "csrf_failed"


class EmailNotVerifiedError(ForbiddenError):
    """The account's email address is not verified yet."""

    code = "email_not_verified"


class QuotaExceededError(ConflictError):
    """An organisation cap (projects, queues, schedules) is reached."""

    code = "quota_exceeded"


class RateLimitedError(CodityError):
    code = "rate_limited"

    def __init__(
        self, message: str, *, retry_after_s: float, details: dict[str, Any] | None = None
    ) -> None:
        self.retry_after_s = max(1, math.ceil(retry_after_s))
        super().__init__(message, details={"retry_after_s": self.retry_after_s, **(details or {})})
