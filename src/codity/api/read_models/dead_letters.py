"""Dead letters of a project: pages, totals and the most frequent reasons."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from codity.api.resource_errors import DeadLetterNotFoundError
from codity.api.schemas.dead_letters import DeadLetterPublic, DeadLetterReason
from codity.core import Conn

#: How many distinct reasons a page summarises.
TOP_REASONS = 5

# $1 project_id, $2 queue_id or NULL, $3 include already replayed ones.
_SCOPE = """
FROM dead_letter_jobs d JOIN queues q ON q.id = d.queue_id
WHERE q.project_id = $1 AND ($2::uuid IS NULL OR d.queue_id = $2)
  AND ($3::boolean OR d.replayed_at IS NULL)
"""


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
    rows = await conn.fetch(
        f"""SELECT d.id, d.job_id, d.queue_id, q.name AS queue_name, d.handler, d.error,
                   d.attempts, d.failed_at, d.replayed_at, d.replay_count, d.payload,
                   octet_length(d.payload::text) AS payload_size
            {_SCOPE}
              AND ($4::timestamptz IS NULL OR (d.failed_at, d.id) < ($4, $5::uuid))
            ORDER BY d.failed_at DESC, d.id DESC LIMIT $6""",
        project_id,
        queue_id,
        include_replayed,
        None if after is None else after[0],
        None if after is None else after[1],
        limit,
    )
    return [DeadLetterPublic.model_validate(dict(r)) for r in rows]


async def summarise(
    conn: Conn, project_id: UUID, *, queue_id: UUID | None, include_replayed: bool
) -> tuple[int, list[DeadLetterReason]]:
    """How many match the filter, and the most frequent errors among them."""
    total: int = await conn.fetchval(
        f"SELECT count(*) {_SCOPE}", project_id, queue_id, include_replayed
    )
    rows = await conn.fetch(
        f"""SELECT left(d.error, 500) AS error, count(*) AS count {_SCOPE}
            GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT {TOP_REASONS}""",
        project_id,
        queue_id,
        include_replayed,
    )
    return total, [DeadLetterReason(error=r["error"], count=r["count"]) for r in rows]


async def ids_in_project(conn: Conn, project_id: UUID, ids: Sequence[UUID]) -> list[UUID]:
    """The given dead-letter ids, all of which must belong to the project (404 otherwise)."""
    wanted = sorted(set(ids))
    found = await conn.fetch(
        """SELECT d.id FROM dead_letter_jobs d JOIN queues q ON q.id = d.queue_id
           WHERE q.project_id = $1 AND d.id = ANY($2::uuid[])""",
        project_id,
        wanted,
    )
    known = {r["id"] for r in found}
    missing = [str(i) for i in wanted if i not in known]
    if missing:
        raise DeadLetterNotFoundError(
            f"no dead letter {missing[0]} in this project", details={"ids": missing}
        )
    return wanted
