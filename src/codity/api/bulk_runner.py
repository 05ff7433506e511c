"""The bulk-action runner: one `LoopService` per API process that works through open bulk
actions, one chunk per transaction.

A chunk is one transaction that
1. locks the action's row (still running, still this process's: a stop or a takeover ends
   the run; the stop route waits for this lock, so a stop never lands mid-chunk),
2. reads the window: the next BULK_ACTION_CHUNK ids the frozen filter matches after the
   action's position (never above its high-water mark),
3. locks the window's rows that still match, FOR UPDATE SKIP LOCKED (a row a worker holds this
   instant is skipped, not waited for),
4. applies the action through `codity.core` (the single-row rules, set-based),
5. writes the position and the counts to the action's row.

Steps 4 and 5 commit together, so a run resumed after a crash starts exactly after what was
done and never acts twice. The runner pauses BULK_ACTION_PAUSE_MS between chunks. A running
action whose process died (no progress for BULK_ACTION_STALE_MS) is taken over and resumed by
the next API process that looks (`bulk_actions_claim`). When an action ends (completed, failed,
or stopped by the stop route) one audit row records it with its filter and counts.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import asyncpg
import structlog

from codity import core
from codity.api.stores import bulk_actions as store
from codity.api.stores.audit import insert_event
from codity.core.loop_service import LoopService
from codity.db.reconnect import is_transient, sleep_or_stop
from codity.settings import Settings

log = structlog.get_logger("codity.api.bulk")

#: How often an idle runner looks for work it was not woken for (another process's action, a
#: takeover); a new action of this process wakes it at once.
POLL_INTERVAL_MS = 1000

JobAction = Callable[[core.Conn, Sequence[Mapping[str, Any]]], Awaitable[list[int]]]
JOB_ACTIONS: dict[str, JobAction] = {
    "cancel": core.bulk_cancel_jobs,
    "retry": core.bulk_retry_jobs,
    "delete": core.bulk_delete_jobs,
}


def new_owner() -> str:
    """This runner's name in `bulk_actions.owner`: host, pid and a random part (a restarted
    process is another owner)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def audit_filter(stored: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The filter as the audit row keeps it: a payload search keeps its path, not its value
    (audit details never hold payload values)."""
    if stored is None:
        return None
    kept = dict(stored)
    if "payload" in kept:
        kept["payload"] = kept["payload"].split("=", 1)[0].strip() + " = …"
    return kept


async def write_audit(conn: core.Conn, row: Mapping[str, Any]) -> None:
    """The one audit row of a bulk action, written when it ends (in the transaction that ends
    it): who created it, the action, the frozen filter (or how many ids) and the final counts."""
    ids = row["ids"]
    await insert_event(
        conn,
        org_id=row["org_id"],
        project_id=row["project_id"],
        actor_user_id=row["created_by"],
        actor_api_key_id=row["created_by_api_key"],
        action=f"{'job' if row['target'] == 'jobs' else 'dead_letter'}.bulk_{row['action']}",
        target_type="bulk_action",
        target_id=str(row["id"]),
        details={
            "status": row["status"],
            "filter": audit_filter(row["filter"]),
            "ids_count": len(ids) if ids is not None else None,
            "matched": row["matched"],
            "processed": row["processed"],
            "skipped": row["skipped"],
        },
        request_id=row["request_id"] or "",
        ip=None,
    )


async def run_chunk(
    pool: asyncpg.Pool[Any], bulk_action_id: uuid.UUID, owner: str, chunk: int
) -> bool:
    """One chunk in one transaction. True while there is more to do."""
    async with pool.acquire() as conn, conn.transaction():
        action = await store.lock(conn, bulk_action_id, owner)
        if action is None:  # stopped, or taken over by another process
            return False
        if action["target"] == "jobs":
            window = await store.job_window(conn, action, chunk)
            done: list[Any] = []
            if window:
                rows = await store.lock_jobs(conn, action, window)
                done = await JOB_ACTIONS[action["action"]](conn, rows)
                position: dict[str, Any] = {"after_id": window[-1]}
            seen = len(window)
        else:
            dl_window = await store.dead_letter_window(conn, action, chunk)
            done = []
            if dl_window:
                locked = await store.lock_dead_letters(conn, action, [i for _, i in dl_window])
                if action["action"] == "replay":
                    done = await core.replay_dead_letters(conn, action["project_id"], locked)
                else:
                    count = await core.discard_dead_letters(conn, action["project_id"], locked)
                    done = locked[:count]
                last_at, last_id = dl_window[-1]
                position = {"after_at": last_at.isoformat(), "after_id": str(last_id)}
            seen = len(dl_window)
        if seen:
            await store.record_progress(
                conn,
                bulk_action_id,
                position=position,
                processed=len(done),
                skipped=seen - len(done),
            )
        if seen < chunk:  # the window came back short: the filter is exhausted
            finished = await store.finish(conn, bulk_action_id, "completed")
            if finished is not None:
                await write_audit(conn, finished)
            return False
        return True


async def fail_action(pool: asyncpg.Pool[Any], bulk_action_id: uuid.UUID, error: str) -> None:
    async with pool.acquire() as conn, conn.transaction():
        finished = await store.finish(conn, bulk_action_id, "failed", error[:2000])
        if finished is not None:
            await write_audit(conn, finished)


class BulkActionRunner(LoopService):
    name = "bulk-actions"

    def __init__(
        self, pool: asyncpg.Pool[Any], settings: Settings, *, wake: asyncio.Event | None = None
    ) -> None:
        super().__init__(pool, interval_ms=POLL_INTERVAL_MS, wake=wake or asyncio.Event())
        self.pool = pool
        self.owner = new_owner()
        self.chunk = settings.bulk_action_chunk
        self.pause_s = settings.bulk_action_pause_ms / 1000
        self.stale_ms = settings.bulk_action_stale_ms

    async def run_once(self) -> bool:
        action = await store.claim(self.pool, self.owner, stale_ms=self.stale_ms)
        if action is None:
            return False
        if action["chunks"]:
            log.info(
                "bulk action resumed", bulk_action_id=str(action["id"]), chunks=action["chunks"]
            )
        await self.run_action(action["id"])
        return True

    async def run_action(self, bulk_action_id: uuid.UUID) -> None:
        while not self.stopping.is_set():
            try:
                more = await run_chunk(self.pool, bulk_action_id, self.owner, self.chunk)
            except Exception as exc:
                if is_transient(exc):
                    raise  # the loop waits the outage out; this process then resumes it
                log.error("bulk action failed", bulk_action_id=str(bulk_action_id), exc_info=exc)
                await fail_action(self.pool, bulk_action_id, f"{type(exc).__name__}: {exc}")
                return
            if not more:
                return
            if self.pause_s and await sleep_or_stop(self.pause_s, self.stopping):
                return
