"""Checks on what callers hand to core, done before anything is written.

Each failure is a typed `ValidationError` (or `PayloadTooLargeError`) whose message says what
was wrong, so the API and CLI can show it as is.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any, Final

from codity.domain.errors import PayloadTooLargeError, ValidationError
from codity.domain.flow import MAX_FLOW_KEY_LEN, MAX_UNIQUE_FOR_S, UNFINISHED_STATES
from codity.domain.limits import MAX_PAYLOAD_BYTES
from codity.domain.states import JobStatus

SMALLINT_MIN: Final = -32_768
SMALLINT_MAX: Final = 32_767
MAX_ATTEMPTS_LIMIT: Final = 100  # mirrors the CHECK on jobs.max_attempts
MAX_IDEMPOTENCY_KEY_LEN: Final = 255
MAX_HANDLER_LEN: Final = 200


#: One encoder, made once: json.dumps(..., allow_nan=False) builds a new encoder per call,
#: which costs more than encoding a small payload.
_STRICT_JSON: Final = json.JSONEncoder(allow_nan=False)


def encode_payload(payload: Any, *, what: str = "payload") -> str:
    """`payload` as JSON text; raises if it is not JSON or is over the size cap.

    Enqueue encodes each payload once, here, and sends this text: the size checked is the size
    stored. ensure_ascii (the default) makes the text pure ASCII, so its length is its size in
    bytes without encoding it again.
    """
    try:
        text = _STRICT_JSON.encode(payload)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} is not JSON-serialisable: {exc}") from exc
    if len(text) > MAX_PAYLOAD_BYTES:
        raise PayloadTooLargeError(
            f"{what} is {len(text)} bytes; the limit is {MAX_PAYLOAD_BYTES}",
            details={"size": len(text), "limit": MAX_PAYLOAD_BYTES},
        )
    return text


def check_handler(handler: Any) -> str:
    if not isinstance(handler, str) or not handler.strip():
        raise ValidationError("handler must be a non-empty string")
    if len(handler) > MAX_HANDLER_LEN:
        raise ValidationError(f"handler name is longer than {MAX_HANDLER_LEN} characters")
    return handler


def check_priority(priority: Any) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValidationError("priority must be an integer")
    if not SMALLINT_MIN <= priority <= SMALLINT_MAX:
        raise ValidationError(f"priority must be between {SMALLINT_MIN} and {SMALLINT_MAX}")
    return priority


def check_when(
    run_at: datetime | None, delay_s: float | None
) -> tuple[datetime | None, float | None]:
    """Returns (run_at, delay_ms)."""
    if run_at is not None and delay_s is not None:
        raise ValidationError("give either run_at or delay_s, not both")
    if run_at is not None and (not isinstance(run_at, datetime) or run_at.tzinfo is None):
        raise ValidationError("run_at must be a timezone-aware datetime")
    if delay_s is None:
        return run_at, None
    if (
        isinstance(delay_s, bool)
        or not isinstance(delay_s, int | float)
        or not math.isfinite(delay_s)
    ):
        raise ValidationError("delay_s must be a finite number of seconds")
    if delay_s < 0:
        raise ValidationError(f"delay_s must not be negative, got {delay_s}")
    return None, float(delay_s) * 1000.0


def check_positive(name: str, value: int | None, *, upper: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValidationError(f"{name} must be a positive integer, got {value!r}")
    if upper is not None and value > upper:
        raise ValidationError(f"{name} must be at most {upper}, got {value}")
    return value


def check_idempotency_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > MAX_IDEMPOTENCY_KEY_LEN:
        raise ValidationError(
            f"idempotency_key must be a string of 1 to {MAX_IDEMPOTENCY_KEY_LEN} characters"
        )
    return key


#: A W3C traceparent is 55 characters today; the column allows room for future versions.
MAX_TRACE_PARENT_LEN: Final = 128


def check_trace_parent(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TRACE_PARENT_LEN:
        raise ValidationError(
            f"trace_parent must be a W3C traceparent string of at most {MAX_TRACE_PARENT_LEN} "
            "characters"
        )
    return value


def check_flow_key(name: str, key: str | None) -> str | None:
    """A concurrency_key or unique_key: 1 to MAX_FLOW_KEY_LEN characters, or None."""
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > MAX_FLOW_KEY_LEN:
        raise ValidationError(f"{name} must be a string of 1 to {MAX_FLOW_KEY_LEN} characters")
    return key


def check_unique(
    unique_for_s: float | None, unique_key: str | None, unique_states: Any
) -> tuple[float, tuple[JobStatus, ...]] | None:
    """(window in ms, states matched) of a unique enqueue, or None for a plain one.

    unique_key and unique_states mean nothing without unique_for_s: giving them alone is an
    error rather than a silently plain enqueue.
    """
    if unique_for_s is None:
        if unique_key is not None or unique_states is not None:
            raise ValidationError("unique_key and unique_states need unique_for_s")
        return None
    if (
        isinstance(unique_for_s, bool)
        or not isinstance(unique_for_s, int | float)
        or not math.isfinite(unique_for_s)
        or not 0 < unique_for_s <= MAX_UNIQUE_FOR_S
    ):
        raise ValidationError(
            f"unique_for_s must be a number of seconds above 0 and at most {MAX_UNIQUE_FOR_S:.0f}"
        )
    check_flow_key("unique_key", unique_key)
    if unique_states is None:
        return float(unique_for_s) * 1000.0, UNFINISHED_STATES
    if isinstance(unique_states, str) or not unique_states:
        raise ValidationError("unique_states must be a non-empty list of job statuses")
    states: list[JobStatus] = []
    for state in unique_states:
        try:
            states.append(JobStatus(state))
        except ValueError:
            raise ValidationError(
                f"unique_states: {state!r} is not a job status "
                f"(one of {', '.join(s.value for s in JobStatus)})"
            ) from None
    return float(unique_for_s) * 1000.0, tuple(dict.fromkeys(states))


def storable_text(text: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL; handler errors and log lines sometimes do."""
    if text is None:
        return None
    return text.replace("\x00", "\\x00") if "\x00" in text else text


def storable_json(value: Any) -> Any:
    """A handler's result as something jsonb accepts, without failing the batch it is in.

    Values JSON cannot hold (datetimes, UUIDs, Decimals) are stored as their str(); NaN and
    other values jsonb refuses are replaced by a note naming the type.
    """
    if value is None or isinstance(value, str | int | bool):
        return value
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        pass
    try:
        return json.loads(json.dumps(value, default=str, allow_nan=False))
    except (TypeError, ValueError):
        return {"unstorable_result": type(value).__name__}
