"""Concurrency keys: at most key_concurrency_limit jobs with one key claimed or running at once.

In the shape of the limit-5 test (test_core_concurrency.py): 20 loops claim, run and complete
jobs of a queue with a key limit of 2 over 50 keys for 40 rounds; after every claim the test
checks, per key, the jobs it knows are leased (claimed and not yet handed to complete) and the
database's leased count. Neither may exceed the limit. The twins run the same race with one
part of the mechanism removed and must see it exceeded.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue
from tests.integration.core.helpers import new_worker, replaced, rewrite_function

from codity.core import ClaimedJob, Completion, NewJob, claim, complete, enqueue_many, mark_running
from codity.core.claim import _job
from codity.db.pool import create_pool
from codity.db.queries import sql

KEY_LIMIT = 2
KEYS = 50
LOOPS = 20
ROUNDS = 40
BATCH = 3

ClaimFn = Callable[[Any, uuid.UUID, uuid.UUID], Awaitable[list[ClaimedJob]]]


async def _key_race(pool: asyncpg.Pool[Any], claim_fn: ClaimFn, rounds: int = ROUNDS) -> int:
    """Returns the most jobs of one key ever seen leased at once."""
    queue_id = await make_queue(pool, key_concurrency_limit=KEY_LIMIT)
    rng = random.Random(9)
    keys = [f"k{rng.randrange(KEYS)}" for _ in range(LOOPS * rounds * BATCH)]
    made = await enqueue_many(pool, queue_id, [NewJob("keyed", concurrency_key=k) for k in keys])
    key_of = {job.id: key for job, key in zip(made, keys, strict=True)}
    workers = [await new_worker(pool) for _ in range(LOOPS)]
    held: Counter[str] = Counter()  # claimed and not yet handed to complete: certainly leased
    most = 0
    start = asyncio.Event()

    async def loop(worker_id: uuid.UUID) -> None:
        nonlocal most
        async with pool.acquire() as conn:
            await start.wait()
            for _ in range(rounds):
                jobs = await claim_fn(conn, worker_id, queue_id)
                held.update(key_of[j.id] for j in jobs)
                leased = await conn.fetchval(
                    """SELECT COALESCE(max(n), 0) FROM (
                         SELECT count(*) AS n FROM jobs
                         WHERE queue_id = $1 AND status IN ('claimed', 'running')
                         GROUP BY concurrency_key) s""",
                    queue_id,
                )
                most = max(most, leased, max(held.values(), default=0))
                if jobs:
                    await mark_running(conn, [j.fence for j in jobs])
                    await asyncio.sleep(0.001)  # the handler runs
                    held.subtract(key_of[j.id] for j in jobs)
                    await complete(conn, [Completion(j.fence) for j in jobs])
                else:
                    await asyncio.sleep(0.001)

    tasks = [asyncio.create_task(loop(w)) for w in workers]
    await asyncio.sleep(0.05)
    start.set()
    await asyncio.gather(*tasks)
    return most


@pytest.fixture
async def race_pool(database_url: str) -> Any:
    pool = await create_pool(database_url, min_size=LOOPS, max_size=LOOPS)
    try:
        yield pool
    finally:
        await pool.close()


async def _core_claim(conn: Any, worker_id: uuid.UUID, queue_id: uuid.UUID) -> list[ClaimedJob]:
    return await claim(conn, worker_id, [queue_id], BATCH, 30_000)


def _statement_claim(statement: str) -> ClaimFn:
    async def claim_fn(conn: Any, worker_id: uuid.UUID, queue_id: uuid.UUID) -> list[ClaimedJob]:
        rows = await conn.fetch(
            statement, worker_id, 30_000, [queue_id], BATCH, False, None, None, None, None, False
        )
        return [_job(r, worker_id) for r in rows if r["id"] is not None]

    return claim_fn


async def test_key_limit_2_over_50_keys_raced_by_20_loops_never_runs_3_of_a_key(
    race_pool: asyncpg.Pool[Any],
) -> None:
    most = await _key_race(race_pool, _core_claim)
    assert 0 < most <= KEY_LIMIT


async def test_a_full_key_does_not_hold_back_the_other_keys(db: asyncpg.Connection[Any]) -> None:
    """Head of the queue: 10 jobs of one key (limit 2). A claim of 5 takes 2 of them and passes
    over the rest to the jobs behind them; with the key full, the next claim takes only others."""
    queue_id = await make_queue(db, key_concurrency_limit=KEY_LIMIT)
    hot = await enqueue_many(db, queue_id, [NewJob("h", concurrency_key="hot")] * 10)
    cold = await enqueue_many(
        db, queue_id, [NewJob("h", concurrency_key=f"c{i}") for i in range(6)]
    )
    plain = await enqueue_many(db, queue_id, [NewJob("h")] * 2)  # no key: no key limit
    worker = await new_worker(db)
    first = {j.id for j in await claim(db, worker, [queue_id], 5, 30_000)}
    assert first == {hot[0].id, hot[1].id, cold[0].id, cold[1].id, cold[2].id}
    second = {j.id for j in await claim(db, worker, [queue_id], 10, 30_000)}
    assert second == {c.id for c in cold[3:]} | {p.id for p in plain}


async def _a_key_with_room_for_one_of_two_scanned(db: asyncpg.Connection[Any]) -> int:
    """Key `a` has 1 of its 2 leased; the queue's front is a, a, b. A claim of 3 scans all
    three: `a` has room for one of its two. Returns how many jobs of `a` are then leased."""
    queue_id = await make_queue(db, key_concurrency_limit=KEY_LIMIT)
    await enqueue_many(db, queue_id, [NewJob("h", concurrency_key="a")])
    assert len(await claim(db, await new_worker(db), [queue_id], 1, 30_000)) == 1
    await enqueue_many(db, queue_id, [NewJob("h", concurrency_key=k) for k in ("a", "a", "b")])
    second = await claim(db, await new_worker(db), [queue_id], 3, 30_000)
    assert len(second) >= 2  # the first `a` and `b`
    leased: int = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE queue_id = $1 AND concurrency_key = 'a' "
        "AND status IN ('claimed', 'running')",
        queue_id,
    )
    return leased


async def test_a_key_with_room_for_fewer_jobs_than_the_round_scanned_takes_only_its_room(
    db: asyncpg.Connection[Any],
) -> None:
    """The first round takes every scanned job at once only when each key has room for all of
    its scanned jobs (codity_keyed_candidates' `all_fit`, migration 0031); here `a` has not,
    and the take step gives it one."""
    assert await _a_key_with_room_for_one_of_two_scanned(db) == KEY_LIMIT


async def test_break_it_all_fit_without_the_scanned_counts_exceeds_the_limit(
    db: asyncpg.Connection[Any],
) -> None:
    """A key that "fits" when it has room for one job, whatever the round scanned of it."""
    await rewrite_function(
        db,
        "codity_keyed_candidates",
        lambda d: replaced(d, "bool_and(r.n >= r.scanned)", "bool_and(r.n >= 1)"),
    )
    assert await _a_key_with_room_for_one_of_two_scanned(db) > KEY_LIMIT


async def test_break_it_without_the_key_step_the_limit_is_exceeded(
    race_pool: asyncpg.Pool[Any],
) -> None:
    """The queue's key limit ignored (its candidates taken by the plain branch)."""
    keyless = sql("claim_jobs_flow").replace(
        "COALESCE(s.key_concurrency_limit IS NOT NULL OR s.rate_limit_per_key, false) AS keyed",
        "false AS keyed",
    )
    assert keyless != sql("claim_jobs_flow")
    most = await _key_race(race_pool, _statement_claim(keyless), rounds=10)
    assert most > KEY_LIMIT


async def test_break_it_without_the_key_locks_the_limit_is_exceeded(
    race_pool: asyncpg.Pool[Any],
) -> None:
    """Every key lock "granted" without being taken: claimers of one key no longer take
    turns, so each counts before the others commit."""
    await rewrite_function(
        race_pool,
        "codity_keyed_candidates",
        lambda d: replaced(
            d, "pg_try_advisory_xact_lock(1668244586, hashtext(queue::text || '/' || u.k))", "true"
        ),
    )
    most = await _key_race(race_pool, _core_claim, rounds=10)
    assert most > KEY_LIMIT


async def test_break_it_counting_in_the_statement_that_takes_the_locks_exceeds_the_limit(
    race_pool: asyncpg.Pool[Any],
) -> None:
    """The locks taken, and the room read in the SAME statement that takes them: that
    statement's snapshot was taken before the locks were granted, so it misses the claims the
    keys' previous holders committed meanwhile. The room must be read by a new statement,
    after. (A try-lock never waits, so the gap between that snapshot and the lock is short: a
    3 ms sleep inside the broken statement, before it locks, makes the race show every time.)"""

    def lock_and_count_at_once(d: str) -> str:
        locks = d[d.index("    -- step: lock keys") : d.index("    -- step: room")]
        room = d[d.index("    -- step: room") : d.index("    -- step: all fit")]
        one_statement = """    -- step: lock and count in one statement (broken on purpose)
    WITH keys AS (
      SELECT DISTINCT u.k FROM unnest(scan_keys) AS u(k), (SELECT pg_sleep(0.003)) AS z
      WHERE NOT u.k = ANY(held)
    ),
    locked AS (
      SELECT k.k, pg_try_advisory_xact_lock(1668244586, hashtext(queue::text || '/' || k.k))
               AS got
      FROM keys k
    ),
    leased AS (
      SELECT j.concurrency_key AS k, count(*)::integer AS n
      FROM jobs j
      WHERE j.queue_id = queue AND j.status IN ('claimed', 'running')
        AND j.concurrency_key IN (SELECT l.k FROM locked l WHERE l.got)
      GROUP BY 1
    )
    SELECT held || COALESCE(array_agg(l.k) FILTER (WHERE l.got), '{}'),
           COALESCE(array_agg(l.k) FILTER (WHERE NOT l.got), '{}'),
           room_keys || COALESCE(array_agg(l.k) FILTER (WHERE l.got), '{}'),
           room_left
             || COALESCE(array_agg(key_limit - COALESCE(c.n, 0)) FILTER (WHERE l.got), '{}'),
           room_at || COALESCE(array_agg(clock_timestamp()) FILTER (WHERE l.got), '{}')
    INTO held, refused, room_keys, room_left, room_at
    FROM locked l LEFT JOIN leased c ON c.k = l.k;
    passed := passed || refused;
"""
        return replaced(d, locks + room, one_statement)

    await rewrite_function(race_pool, "codity_keyed_candidates", lock_and_count_at_once)
    most = await _key_race(race_pool, _core_claim, rounds=10)
    assert most > KEY_LIMIT
