"""The claim race harness: N loops claim from one queue at the same instant, with two detectors.

Detector 1 (in process): every job id handed out goes into a set; a second sighting is a
duplicate. Detector 2 (in the database): every job was claimed exactly once iff
count(*) FILTER (WHERE attempt <> 1) = 0 (attempt is incremented on every claim).
`naive_claim` is the textbook broken claim (SELECT, then UPDATE): it lives here, in tests,
never in src, to prove the detectors catch what they are meant to catch.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from codity.core import claim

ClaimFn = Callable[[Any, uuid.UUID, uuid.UUID, int], Awaitable[list[int]]]


async def core_claim(conn: Any, worker_id: uuid.UUID, queue_id: uuid.UUID, limit: int) -> list[int]:
    return [j.id for j in await claim(conn, worker_id, [queue_id], limit, 30_000)]


async def naive_claim(
    conn: Any, worker_id: uuid.UUID, queue_id: uuid.UUID, limit: int
) -> list[int]:
    """BROKEN ON PURPOSE: two claimers read the same rows between the two statements."""
    ids = [
        r["id"]
        for r in await conn.fetch(
            "SELECT id FROM jobs WHERE queue_id = $1 AND status = 'queued' "
            "ORDER BY priority DESC, run_at, id LIMIT $2",
            queue_id,
            limit,
        )
    ]
    await asyncio.sleep(0)  # any gap at all between read and write is enough
    claimed = []
    for job_id in ids:  # row by row: a multi-row UPDATE here would also deadlock
        row = await conn.fetchrow(
            "UPDATE jobs SET status = 'claimed', worker_id = $2, attempt = attempt + 1, "
            "execution_seq = execution_seq + 1, lock_expires_at = now() + interval '30 s' "
            "WHERE id = $1 RETURNING id",
            job_id,
            worker_id,
        )
        claimed.append(row["id"])
    return claimed


@dataclass(frozen=True)
class RaceReport:
    claimed: int  # distinct jobs handed out
    handed_out: int  # total hand-outs, duplicates included
    duplicates_in_process: int
    claimed_twice_in_db: int
    distinct_claimers: int
    left_queued: int
    distribution: list[int]
    worst_job_claims: int


async def race(
    pool: asyncpg.Pool[Any],
    queue_id: uuid.UUID,
    worker_ids: list[uuid.UUID],
    claim_fn: ClaimFn,
    batch: int,
) -> RaceReport:
    seen: Counter[int] = Counter()
    per_worker: Counter[uuid.UUID] = Counter()
    # Every loop holds its connection before any claims: they start together (a sleep
    # before the start would not wait for a slow pool on a loaded machine).
    start = asyncio.Barrier(len(worker_ids))
    # A new connection's first claim is prepared, and asyncpg asks the server about the
    # statement's array types: 10-15 ms against 1 ms for the next claims (an idle machine),
    # longer than a 1,000-job race on a loaded one, where a loop still preparing found the
    # queue empty. Each loop claims once from a queue with no jobs before the start instead.
    no_jobs = uuid.uuid4()

    async def loop(worker_id: uuid.UUID) -> None:
        async with pool.acquire() as conn:
            assert await claim_fn(conn, worker_id, no_jobs, batch) == []
            await start.wait()
            while True:
                got = await claim_fn(conn, worker_id, queue_id, batch)
                if not got:
                    return
                seen.update(got)
                per_worker[worker_id] += len(got)

    await asyncio.gather(*(loop(w) for w in worker_ids))
    db = await pool.fetchrow(
        """SELECT count(*) FILTER (WHERE attempt <> 1) AS twice,
                  count(DISTINCT worker_id) AS claimers,
                  count(*) FILTER (WHERE status = 'queued') AS left_queued
           FROM jobs WHERE queue_id = $1""",
        queue_id,
    )
    return RaceReport(
        claimed=len(seen),
        handed_out=sum(seen.values()),
        duplicates_in_process=sum(n - 1 for n in seen.values()),
        claimed_twice_in_db=db["twice"],
        distinct_claimers=db["claimers"],
        left_queued=db["left_queued"],
        distribution=[per_worker[w] for w in worker_ids],
        worst_job_claims=max(seen.values(), default=0),
    )
