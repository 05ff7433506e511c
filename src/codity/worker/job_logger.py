"""The logger a handler writes with: entries buffered in memory, written to `job_logs` in batches.

Bounded per attempt (count and size) so a chatty or runaway handler cannot fill the database;
field values go through the same redaction as the service logs, so a handler that logs
`payload=...` or `password=...` stores sizes and "[redacted]", never the values.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

from codity import core
from codity.logs import redact_processor

#: At most this many entries are stored per attempt; the rest are counted and reported once.
MAX_ENTRIES_PER_ATTEMPT = 1000
#: job_logs.message has a CHECK of 4096 bytes.
MAX_MESSAGE_BYTES = 4096
#: Larger field sets are replaced by their size and keys.
MAX_FIELDS_BYTES = 8192

LEVELS = ("debug", "info", "warning", "error")


def _truncate_utf8(text: str, limit: int) -> str:
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode(errors="ignore") + "..."


def _safe_fields(fields: dict[str, Any]) -> dict[str, Any]:
    redacted = dict(redact_processor(None, "", dict(fields)))
    try:
        encoded = json.dumps(redacted, default=str, allow_nan=False)
    except (TypeError, ValueError):
        return {"unserialisable_fields": sorted(str(k) for k in fields)}
    if len(encoded.encode()) > MAX_FIELDS_BYTES:
        return {"fields_too_large": {"size": len(encoded.encode()), "keys": sorted(redacted)}}
    result: dict[str, Any] = json.loads(encoded)
    return result


class JobLogger:
    """`ctx.logger.info("sent", recipients=3)`; thread-safe, so sync handlers can use it too."""

    def __init__(self, fence: core.Fence) -> None:
        self._fence = fence
        self._lock = threading.Lock()
        self._pending: list[core.LogEntry] = []
        self._accepted = 0
        self._dropped = 0
        self._dropped_reported = False
        #: Set by the attempt's span (codity[otel]): every line then carries the trace id.
        self.trace_id: str | None = None

    def log(self, level: str, message: str, **fields: Any) -> None:
        level = level.lower() if level.lower() in LEVELS else "info"
        with self._lock:
            if self._accepted >= MAX_ENTRIES_PER_ATTEMPT:
                self._dropped += 1
                return
            self._accepted += 1
            if self.trace_id is not None:
                fields["trace_id"] = self.trace_id
            self._pending.append(
                core.LogEntry(
                    level=level,
                    message=_truncate_utf8(str(message), MAX_MESSAGE_BYTES),
                    fields=_safe_fields(fields),
                    at=datetime.now(UTC),
                )
            )

    def debug(self, message: str, **fields: Any) -> None:
        self.log("debug", message, **fields)

    def info(self, message: str, **fields: Any) -> None:
        self.log("info", message, **fields)

    def warning(self, message: str, **fields: Any) -> None:
        self.log("warning", message, **fields)

    def error(self, message: str, **fields: Any) -> None:
        self.log("error", message, **fields)

    @property
    def has_pending(self) -> bool:
        return bool(self._pending) or (self._dropped > 0 and not self._dropped_reported)

    def _take(self, final: bool) -> list[core.LogEntry]:
        with self._lock:
            entries, self._pending = self._pending, []
            if final and self._dropped and not self._dropped_reported:
                self._dropped_reported = True
                entries.append(
                    core.LogEntry(
                        level="warning",
                        message=f"log limit of {MAX_ENTRIES_PER_ATTEMPT} entries per attempt "
                        f"reached; {self._dropped} more entries were dropped",
                        fields={"dropped": self._dropped},
                        at=datetime.now(UTC),
                    )
                )
            return entries

    async def flush(self, conn: Any, *, final: bool = False) -> bool:
        """Write what is buffered. On a database error the entries go back into the buffer.

        Returns False when the lease was lost (the entries are then discarded: the attempt they
        belong to no longer owns the job).
        """
        entries = self._take(final)
        if not entries:
            return True
        try:
            ok = await core.append_logs(conn, self._fence, entries)
        except BaseException:
            with self._lock:
                self._pending[:0] = entries
            raise
        return bool(ok)
