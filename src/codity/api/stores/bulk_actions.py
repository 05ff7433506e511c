"""Bulk actions of a project: the row (create, read, list, stop) and the chunk statements
`codity.api.bulk_runner` runs. SQL: `db/sql/api_bulk_actions.sql`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import asyncpg

from codity.api.schemas.bulk_actions import BulkActionPublic, DeadLettersFilter, JobsFilter
from codity.api.stores.jobs import JobFilter, filter_fragments
from codity.core import Conn
from codity.db.queries import Fragments, bind
from codity.domain.errors import BulkActionNotFoundError
from codity.domain.payload_match import parse_payload_match

#: The position before the first dead letter (failed_at is always later).
_DEAD_LETTERS_START = (datetime(1970, 1, 1, tzinfo=UTC), UUID(int=0))


def public(row: asyncpg.Record | dict[str, Any]) -> BulkActionPublic:
    data = dict(row)
    ids = data.get("ids")
    data["ids_count"] = len(ids) if ids is not None else None
    return BulkActionPublic.model_validate(data)


def job_filter(f: JobsFilter, queue_id: UUID | None) -> JobFilter:
    """The jobs list's filter (`stores.jobs.JobFilter`) for a bulk action's frozen filter."""
    return JobFilter(
        queue_id=queue_id,
        statuses=tuple(f.status or ()),
        handler=f.handler,
        created_after=f.created_after,
        created_before=f.created_before,
        batch_id=f.batch_id,
        text=f.q,
        payload_match=parse_payload_match(f.payload) if f.payload else None,
        error_text=f.error,
    )


# --- which rows: the frozen filter as fragments ------------------------------------------------


def job_fragments(
    *,
    filter: JobFilter | None,
    ids: Sequence[int] | None,
    high_water_id: int | None,
) -> Fragments:
    where = filter_fragments(filter) if filter is not None else Fragments()
    if ids is not None:
        where.add("bulk_jobs_when_ids", ids=list(ids))
    if high_water_id is not None:
        where.add("bulk_jobs_up_to", high_water_id=high_water_id)
    return where


def dead_letter_fragments(
    *,
    filter: DeadLettersFilter | None,
    queue_id: UUID | None,
    ids: Sequence[UUID] | None,
    frozen_at: datetime | None,
    pending_only: bool,
) -> Fragments:
    where = Fragments()
    if queue_id is not None:
        where.add("bulk_dead_letters_when_queue", queue_id=queue_id)
    if pending_only or (filter is not None and not filter.include_replayed):
        where.add("bulk_dead_letters_when_pending")
    if ids is not None:
        where.add("bulk_dead_letters_when_ids", ids=list(ids))
    if frozen_at is not None:
        where.add("bulk_dead_letters_up_to", frozen_at=frozen_at)
    return where


def _frozen_jobs(action: asyncpg.Record) -> Fragments:
    stored = action["filter"]
    return job_fragments(
        filter=job_filter(JobsFilter.model_validate(stored), action["queue_id"])
        if stored is not None
        else None,
        ids=action["ids"],
        high_water_id=action["high_water_id"],
    )


def _frozen_dead_letters(action: asyncpg.Record) -> Fragments:
    stored = action["filter"]
    ids = action["ids"]
    return dead_letter_fragments(
        filter=DeadLettersFilter.model_validate(stored) if stored is not None else None,
        queue_id=action["queue_id"],
        ids=[UUID(i) for i in ids] if ids is not None else None,
        frozen_at=action["frozen_at"],
        pending_only=action["action"] == "replay",
    )


# --- counts at creation ------------------------------------------------------------------------


async def count_jobs(conn: Conn, project_id: UUID, where: Fragments) -> int:
    count: int = await where.bind("bulk_jobs_count", project_id=project_id).fetchval(conn)
    return count


async def count_dead_letters(conn: Conn, project_id: UUID, where: Fragments) -> int:
    count: int = await where.bind("bulk_dead_letters_count", project_id=project_id).fetchval(conn)
    return count


async def high_water_id(conn: Conn) -> int:
    value: int = await bind("bulk_jobs_high_water").fetchval(conn)
    return value


# --- the row -----------------------------------------------------------------------------------


async def insert(conn: Conn, **values: Any) -> asyncpg.Record:
    row: asyncpg.Record = await bind("bulk_actions_insert", **values).fetchrow(conn)
    return row


async def get(conn: Conn, project_id: UUID, bulk_action_id: UUID) -> BulkActionPublic:
    row = await bind(
        "bulk_actions_get", project_id=project_id, bulk_action_id=bulk_action_id
    ).fetchrow(conn)
    if row is None:
        raise BulkActionNotFoundError(f"no bulk action {bulk_action_id} in this project")
    return public(row)


async def page(
    conn: Conn, project_id: UUID, *, limit: int, after: tuple[datetime, UUID] | None
) -> list[BulkActionPublic]:
    where = Fragments()
    if after is not None:
        where.add("bulk_actions_after", after_at=after[0], after_id=after[1])
    q = where.bind("bulk_actions_list", project_id=project_id, limit=limit)
    return [public(r) for r in await q.fetch(conn)]


async def stop(conn: Conn, project_id: UUID, bulk_action_id: UUID) -> asyncpg.Record | None:
    """The stopped row (with org_id), or None when it was not open (or not the project's)."""
    row: asyncpg.Record | None = await bind(
        "bulk_actions_stop", project_id=project_id, bulk_action_id=bulk_action_id
    ).fetchrow(conn)
    return row


# --- the runner's statements -------------------------------------------------------------------


async def claim(conn: Conn, owner: str, *, stale_ms: int) -> asyncpg.Record | None:
    row: asyncpg.Record | None = await bind(
        "bulk_actions_claim", owner=owner, stale_ms=stale_ms
    ).fetchrow(conn)
    return row


async def lock(conn: Conn, bulk_action_id: UUID, owner: str) -> asyncpg.Record | None:
    row: asyncpg.Record | None = await bind(
        "bulk_actions_lock", bulk_action_id=bulk_action_id, owner=owner
    ).fetchrow(conn)
    return row


async def record_progress(
    conn: Conn, bulk_action_id: UUID, *, position: dict[str, Any], processed: int, skipped: int
) -> None:
    await bind(
        "bulk_actions_progress",
        bulk_action_id=bulk_action_id,
        position=position,
        processed=processed,
        skipped=skipped,
    ).execute(conn)


async def finish(
    conn: Conn, bulk_action_id: UUID, status: str, error: str | None = None
) -> asyncpg.Record | None:
    row: asyncpg.Record | None = await bind(
        "bulk_actions_finish", bulk_action_id=bulk_action_id, status=status, error=error
    ).fetchrow(conn)
    return row


async def job_window(conn: Conn, action: asyncpg.Record, chunk: int) -> list[int]:
    """The next `chunk` job ids of the frozen filter after the position (unlocked)."""
    after = (action["position"] or {}).get("after_id", 0)
    q = _frozen_jobs(action).bind(
        "bulk_jobs_window", project_id=action["project_id"], after_id=after, chunk=chunk
    )
    return [r["id"] for r in await q.fetch(conn)]


async def lock_jobs(conn: Conn, action: asyncpg.Record, window: list[int]) -> list[asyncpg.Record]:
    """The window's jobs that still match, locked (SKIP LOCKED)."""
    q = _frozen_jobs(action).bind("bulk_jobs_lock", project_id=action["project_id"], window=window)
    rows: list[asyncpg.Record] = await q.fetch(conn)
    return rows


async def dead_letter_window(
    conn: Conn, action: asyncpg.Record, chunk: int
) -> list[tuple[datetime, UUID]]:
    position = action["position"]
    after = (
        (datetime.fromisoformat(position["after_at"]), UUID(position["after_id"]))
        if position
        else _DEAD_LETTERS_START
    )
    q = _frozen_dead_letters(action).bind(
        "bulk_dead_letters_window",
        project_id=action["project_id"],
        after_at=after[0],
        after_id=after[1],
        chunk=chunk,
    )
    return [(r["failed_at"], r["id"]) for r in await q.fetch(conn)]


async def lock_dead_letters(conn: Conn, action: asyncpg.Record, window: list[UUID]) -> list[UUID]:
    q = _frozen_dead_letters(action).bind(
        "bulk_dead_letters_lock", project_id=action["project_id"], window=window
    )
    return [r["id"] for r in await q.fetch(conn)]
