"""Fair shares between projects, at the claim (codity_fair_shares via claim_round(fair=True)).

A simulated worker with SLOTS slots claims, in rounds, what its free slots allow from queues of
several projects, and finishes a random part of what it holds before the next round (jobs of
random length). The tests read who held the slots: priority orders the queues of one project
only (a priority-1000 queue of project A does not starve project B's priority-0 queue, though
it comes before A's own priority-0 queue); a project without work leaves its share to the others
(every claim is as full as the jobs allow); weights 1, 2 and 3 get 1/6, 2/6 and 3/6 of the slots
within 10%. The twin claims without fair shares (strict priority across projects) and B starves.
The worker-level scenario (two real workers, 20,000 jobs) is
tests/integration/worker/test_worker_fair_shares.py.

Each test runs on plain queues and on queues with a rate limit far above what the test starts
(claim_jobs_flow's flow steps run beside the shares), and each with the claimer's load counted
in `jobs` (a codity.core caller) and passed as it holds it (`held`, as the worker does). Last,
the fleet-wide view of a worker that passes what it holds: what other workers published (at a
fair claim or a heartbeat) counts, a stopped worker's does not; the twin without publications
splits as if nothing else ran.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
from tests.factories import make_project, make_queue, make_tenant
from tests.integration.core.helpers import new_worker

from codity.core import (
    ClaimedJob,
    Claimer,
    Completion,
    NewJob,
    claim,
    complete,
    enqueue_many,
    heartbeat,
    set_worker_status,
)
from codity.domain.states import WorkerStatus

SLOTS = 12
#: A rate limit that the tests never reach: the claim's flow steps run, and limit nothing.
UNREACHED_RATE = (1_000_000, 1000)


@pytest.fixture(params=[False, True], ids=["plain queues", "rate-limited queues"])
def flow(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture(params=[False, True], ids=["leased counted", "held passed"])
def held_known(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


async def _queue(
    db: asyncpg.Connection[Any], project: uuid.UUID, flow: bool, **settings: Any
) -> uuid.UUID:
    return await make_queue(db, project, rate_limit=UNREACHED_RATE if flow else None, **settings)


@dataclass
class Held:
    """Slot-rounds held per queue (one slot for one round), and what every claim gave."""

    by_queue: Counter[uuid.UUID] = field(default_factory=Counter)
    claims: list[tuple[int, int]] = field(default_factory=list)  # (asked, got)

    def share(self, *queues: uuid.UUID) -> float:
        total = sum(self.by_queue.values())
        return sum(self.by_queue[q] for q in queues) / total if total else 0.0


async def _run(
    db: asyncpg.Connection[Any],
    queues: list[uuid.UUID],
    rounds: int,
    *,
    fair: bool = True,
    finish: float = 0.3,
    warmup: int = 5,
    slots: int = SLOTS,
    flow: bool = False,
    held_known: bool = False,
) -> Held:
    """`rounds` rounds of: claim the free slots, then finish each held job with probability
    `finish`. Slot-rounds are counted after `warmup` rounds."""
    worker = await new_worker(db)
    claimer = Claimer(worker, 60_000, flow_first=flow)
    rng = random.Random(9)
    held: list[ClaimedJob] = []
    out = Held()
    for n in range(rounds):
        want = slots - len(held)
        load = Counter(j.queue_id for j in held) if held_known else None
        got = await claimer.claim(db, queues, want, fair=fair, held=load) if want else None
        if got is not None:
            held += got.jobs
            out.claims.append((want, len(got.jobs)))
        if n >= warmup:
            out.by_queue.update(j.queue_id for j in held)
        done = [j for j in held if rng.random() < finish]
        if done:
            await complete(db, [Completion(j.fence) for j in done])
        held = [j for j in held if j not in done]
    return out


async def _fill(db: asyncpg.Connection[Any], queue: uuid.UUID, n: int) -> None:
    await enqueue_many(db, queue, [NewJob("work")] * n)


async def _priority_scenario(
    db: asyncpg.Connection[Any], *, fair: bool, flow: bool, held_known: bool = False
) -> tuple[Held, Any]:
    tenant = await make_tenant(db)
    project_b = await make_project(db, tenant.org_id)
    a_high = await _queue(db, tenant.project_id, flow, name="a-high", priority=1000)
    a_low = await _queue(db, tenant.project_id, flow, name="a-low", priority=0)
    b = await _queue(db, project_b, flow, name="b", priority=0)
    for q in (a_high, a_low, b):
        await _fill(db, q, 1_000)
    held = await _run(
        db, [a_high, a_low, b], rounds=60, fair=fair, flow=flow, held_known=held_known
    )
    return held, (a_high, a_low, b)


async def test_priority_orders_queues_within_a_project_only(
    db: asyncpg.Connection[Any], flow: bool, held_known: bool
) -> None:
    held, (a_high, a_low, b) = await _priority_scenario(
        db, fair=True, flow=flow, held_known=held_known
    )
    print(f"a-high {held.share(a_high):.3f}, a-low {held.share(a_low):.3f}, b {held.share(b):.3f}")
    # Between projects the weights (1 and 1) decide, not A's priority 1000 ...
    assert abs(held.share(b) - 0.5) <= 0.05
    # ... and within A its priority does: its priority-0 queue waits while the other has work.
    assert held.by_queue[a_low] == 0
    assert abs(held.share(a_high) - 0.5) <= 0.05


async def test_break_it_without_fair_shares_a_high_priority_queue_starves_the_other_project(
    db: asyncpg.Connection[Any], flow: bool
) -> None:
    held, (a_high, _, b) = await _priority_scenario(db, fair=False, flow=flow)
    print(f"fair shares off: a-high {held.share(a_high):.3f}, b {held.share(b):.3f}")
    assert held.by_queue[b] == 0  # the check above (b within 5% of 0.5) fails
    assert held.share(a_high) == 1.0


async def test_a_project_without_work_leaves_its_share_to_the_others(
    db: asyncpg.Connection[Any], flow: bool, held_known: bool
) -> None:
    """Three projects of weight 1; C has nothing queued, and B runs out part-way: every claim
    is as full as the jobs allow (A and B split the slots while both have work, then A takes
    them all)."""
    tenant = await make_tenant(db)
    a = await _queue(db, tenant.project_id, flow, name="a")
    b = await _queue(db, await make_project(db, tenant.org_id), flow, name="b")
    c = await _queue(db, await make_project(db, tenant.org_id), flow, name="c")
    await _fill(db, a, 2_000)
    await _fill(db, b, 150)
    held = await _run(db, [a, b, c], rounds=80, warmup=0, flow=flow, held_known=held_known)
    left_b = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE queue_id = $1 AND status = 'queued'", b
    )
    print(f"a {held.share(a):.3f}, b {held.share(b):.3f}, c {held.share(c):.3f}; b left {left_b}")
    assert left_b == 0  # B ran out during the run
    assert held.by_queue[c] == 0
    assert all(got == asked for asked, got in held.claims)  # never a slot left free
    assert held.share(b) > 0.25  # B had its share while it had work


async def test_weights_1_2_3_get_one_two_and_three_sixths_of_the_slots(
    db: asyncpg.Connection[Any], flow: bool, held_known: bool
) -> None:
    tenant = await make_tenant(db)
    queues = [
        await _queue(db, await make_project(db, tenant.org_id, weight=w), flow, name=f"w{w}")
        for w in (1, 2, 3)
    ]
    for q in queues:
        await _fill(db, q, 1_500)
    held = await _run(db, queues, rounds=150, slots=60, flow=flow, held_known=held_known)
    shares = [held.share(q) for q in queues]
    print("shares " + ", ".join(f"{s:.3f}" for s in shares))
    for weight, share in zip((1, 2, 3), shares, strict=True):
        assert abs(share - weight / 6) <= 0.1 * weight / 6


async def _two_projects(db: asyncpg.Connection[Any]) -> tuple[uuid.UUID, uuid.UUID]:
    """Queue A and queue B of two projects of weight 1, 100 jobs queued in each."""
    tenant = await make_tenant(db)
    a = await make_queue(db, tenant.project_id, name="a")
    b = await make_queue(db, await make_project(db, tenant.org_id), name="b")
    for q in (a, b):
        await _fill(db, q, 100)
    return a, b


async def _fair_split(
    db: asyncpg.Connection[Any], a: uuid.UUID, b: uuid.UUID, want: int
) -> Counter[uuid.UUID]:
    """A new worker holding nothing claims `want` fairly from A and B, passing what it holds."""
    claimer = Claimer(await new_worker(db), 60_000)
    got = await claimer.claim(db, [a, b], want, fair=True, held={})
    return Counter(j.queue_id for j in got.jobs)


async def test_a_worker_weighs_what_another_worker_published_at_its_heartbeat(
    db: asyncpg.Connection[Any],
) -> None:
    """Worker X serves A alone (no fair claim: it publishes at its heartbeat) and runs 10 of
    A's jobs; a fair claim of 10 by worker Y then gives all 10 to B (both then run 10)."""
    a, b = await _two_projects(db)
    x = await new_worker(db)
    running = await claim(db, x, [a], 10, 60_000)
    await heartbeat(db, x, 60_000, [j.fence for j in running], len(running))
    split = await _fair_split(db, a, b, 10)
    assert split == Counter({b: 10}), split


async def test_a_worker_weighs_what_another_worker_published_at_its_fair_claim(
    db: asyncpg.Connection[Any],
) -> None:
    """Worker X claims fairly (passing what it holds) from A alone, 10 jobs: it publishes them
    with the claim. Worker Y's fair claim of 10 then gives all 10 to B."""
    a, b = await _two_projects(db)
    x = Claimer(await new_worker(db), 60_000)
    assert len((await x.claim(db, [a], 10, fair=True, held={})).jobs) == 10
    split = await _fair_split(db, a, b, 10)
    assert split == Counter({b: 10}), split


async def test_break_it_without_publications_the_split_ignores_the_other_worker(
    db: asyncpg.Connection[Any],
) -> None:
    """The twin of the two above: X runs 10 of A's jobs but has published nothing (no fair
    claim, no heartbeat yet), or has stopped: Y, passing what it holds, splits 5 and 5, as if
    nothing else ran, and the assertion above fails."""
    a, b = await _two_projects(db)
    x = await new_worker(db)
    running = await claim(db, x, [a], 10, 60_000)
    assert await _fair_split(db, a, b, 10) == Counter({a: 5, b: 5})
    await heartbeat(db, x, 60_000, [j.fence for j in running], len(running))
    await set_worker_status(db, x, WorkerStatus.STOPPED)
    assert await _fair_split(db, a, b, 10) == Counter({a: 5, b: 5})
