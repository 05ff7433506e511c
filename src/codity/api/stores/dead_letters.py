"""Dead letters of a project: pages, totals and the most frequent reasons.
SQL: `db/sql/api_dead_letters.sql`. Replay and discard are `codity.core` operations."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from codity.api.schemas.dead_letters import DeadLetterPublic, DeadLetterReason
from codity.core import Conn
from codity.db.queries import Fragments

#: How many distinct reasons a page summarises.
TOP_REASONS = 5


def _where(queue_id: UUID | None, include_replayed: bool) -> Fragments:
    where = Fragments()
    if queue_id is not None:
        where.add("api_dead_letters_when_queue", queue_id=queue_id)
    if not include_replayed:
        where.add("api_dead_letters_when_pending")
    return where


async def list_dead_letters(
    conn: Conn,
    project_id: UUID,
    *,
    queue_id: UUID | None,
    include_replayed: bool,
    limit: int,
    after: tuple[datetime, UUID] | None,
) -> list[DeadLetterPublic]:
    """Most recent first; the keyset is (failed_at, id)."""
    where = _where(queue_id, include_replayed)
    if after is not None:
        where.add("api_dead_letters_after", after_failed_at=after[0], after_id=after[1])
    q = where.bind("api_dead_letters_list", project_id=project_id, limit=limit)
    return [DeadLetterPublic.model_validate(dict(r)) for r in await q.fetch(conn)]


async def summarise(
    conn: Conn, project_id: UUID, *, queue_id: UUID | None, include_replayed: bool
) -> tuple[int, list[DeadLetterReason]]:
    """How many match the filter, and the most frequent errors among them."""
    where = _where(queue_id, include_replayed)
    count = where.bind("api_dead_letters_count", project_id=project_id)
    total: int = await count.fetchval(conn)
    reasons = where.bind("api_dead_letters_reasons", project_id=project_id, top=TOP_REASONS)
    rows = await reasons.fetch(conn)
    return total, [DeadLetterReason(error=r["error"], count=r["count"]) for r in rows]


async def pending_count(conn: Conn, project_id: UUID, queue_id: UUID) -> int:
    """How many dead letters of the queue a replay of the whole queue would re-run."""
    count: int = (
        await _where(queue_id, False)
        .bind("api_dead_letters_count", project_id=project_id)
        .fetchval(conn)
    )
    return count
