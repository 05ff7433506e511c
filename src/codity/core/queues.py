"""Queue lookups and the pause switch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from codity.core.connection import Conn
from codity.db.queries import sql
from codity.domain.errors import QueueNotFoundError


@dataclass(frozen=True)
class QueueInfo:
    id: UUID
    project_id: UUID
    name: str
    priority: int
    concurrency_limit: int | None
    is_paused: bool
    retry_policy_id: UUID | None
    default_max_attempts: int
    default_timeout_ms: int | None
    #: A key limit or a rate limit (claimed through claim_jobs_flow); False when the row read
    #: did not include them.
    flow_control: bool = False

    @classmethod
    def from_row(cls, row: Any) -> QueueInfo:
        return cls(
            id=row["id"],
            project_id=row["project_id"],
            name=row["name"],
            priority=row["priority"],
            concurrency_limit=row["concurrency_limit"],
            is_paused=row["is_paused"],
            retry_policy_id=row["retry_policy_id"],
            default_max_attempts=row["default_max_attempts"],
            default_timeout_ms=row["default_timeout_ms"],
            flow_control=bool(row.get("flow_control", False)),
        )


def _as_uuid(value: str | UUID) -> UUID | None:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(value)
    except ValueError:
        return None


async def resolve_queue(conn: Conn, project_id: UUID, queue: str | UUID) -> QueueInfo:
    """A queue of `project_id`, named by id or by name. QueueNotFoundError otherwise.

    A queue of another project is "not found" too: the caller learns nothing about it.
    """
    as_id = _as_uuid(queue)
    row = None
    if as_id is not None:
        row = await conn.fetchrow(sql("queue_by_id_in_project"), project_id, as_id)
    if row is None and isinstance(queue, str):
        row = await conn.fetchrow(sql("queue_by_name_in_project"), project_id, queue)
    if row is None:
        raise QueueNotFoundError(
            f"no queue {str(queue)!r} in this project", details={"queue": str(queue)}
        )
    return QueueInfo.from_row(row)


async def resolve_worker_queues(conn: Conn, names: Sequence[str] | None) -> list[QueueInfo]:
    """The queues a worker serves: those named (in every project), or every queue for None.

    Raises QueueNotFoundError naming the queues that do not exist.
    """
    wanted = None if names is None else sorted(set(names))
    rows = await conn.fetch(sql("queues_by_name"), wanted)
    found = [QueueInfo.from_row(r) for r in rows]
    if wanted is not None:
        missing = sorted(set(wanted) - {q.name for q in found})
        if missing:
            raise QueueNotFoundError(
                f"no queue named {', '.join(repr(m) for m in missing)}",
                details={"queues": missing},
            )
    return found


async def _set_paused(conn: Conn, project_id: UUID, queue_id: UUID, paused: bool) -> None:
    if await conn.fetchval(sql("set_queue_paused"), queue_id, paused, project_id) is None:
        raise QueueNotFoundError(
            f"no queue {queue_id} in this project", details={"queue": str(queue_id)}
        )


async def pause_queue(conn: Conn, project_id: UUID, queue_id: UUID) -> None:
    """Claims stop returning this queue's jobs; running jobs finish normally. Only a queue of
    the project is paused (another tenant's id: QueueNotFoundError)."""
    await _set_paused(conn, project_id, queue_id, True)


async def resume_queue(conn: Conn, project_id: UUID, queue_id: UUID) -> None:
    await _set_paused(conn, project_id, queue_id, False)
