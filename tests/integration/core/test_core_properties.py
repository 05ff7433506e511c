"""A stateful property test: random operation sequences against the real database.

Hypothesis drives enqueue (with and without dependencies), claim, heartbeat, complete, fail, reap, release, cancel, replay and
promote from two workers (one of which keeps acting on fences it may have lost), and after every
step checks the invariants:
- no job is held by two live leases (at most one believed fence per job matches the database);
- attempt never goes above max_attempts (nor below 0);
- every ended attempt has exactly one execution row (terminal jobs have all of theirs);
- every status change follows the allowed-map (reachable from the previous status);
- a dead-lettered job has its dead-letter copy;
- a waiting job's pending_dependencies equals its unfinished dependencies, none of them doomed.

Hypothesis's state machines are synchronous, so the machine drives its own event loop and
connection; the database is this test's own clone, emptied at the start of every example.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from codity.core import (
    Completion,
    Failure,
    Fence,
    NewJob,
    cancel_job,
    claim,
    complete,
    enqueue,
    enqueue_many,
    fail,
    heartbeat,
    mark_running,
    promote_due,
    reap_expired,
    release,
    replay_queue_dead_letters,
)
from codity.db.pool import connect
from codity.domain.errors import IllegalTransitionError, ValidationError
from codity.domain.states import ALLOWED_TRANSITIONS, LEASED_STATUSES, JobStatus

T = TypeVar("T")
LEASE_MS = 60_000


def _reachable() -> dict[JobStatus, set[JobStatus]]:
    reach: dict[JobStatus, set[JobStatus]] = {}
    for src in JobStatus:
        seen: set[JobStatus] = set()
        frontier = [src]
        while frontier:
            for nxt in ALLOWED_TRANSITIONS[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        reach[src] = seen
    return reach


REACHABLE = _reachable()


class CoreMachine(RuleBasedStateMachine):
    database_url: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.conn: Any = None
        self.queue_id = uuid.uuid4()
        self.workers: list[uuid.UUID] = []
        self.believed: dict[uuid.UUID, dict[int, Fence]] = {}  # what each worker thinks it holds
        self.last_status: dict[int, JobStatus] = {}

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    @initialize()
    def setup(self) -> None:
        self.conn = self.run(connect(self.database_url))
        self.run(
            self.conn.execute(
                "TRUNCATE jobs, job_dependencies, dead_letter_jobs, job_executions, workers, queues, "
                "projects, "
                "organizations CASCADE"
            )
        )
        org = self.run(
            self.conn.fetchval(
                "INSERT INTO organizations (name, slug) VALUES ('o','o') RETURNING id"
            )
        )
        project = self.run(
            self.conn.fetchval(
                "INSERT INTO projects (org_id, name, slug) VALUES ($1, 'p', 'p') RETURNING id", org
            )
        )
        self.queue_id = self.run(
            self.conn.fetchval(
                "INSERT INTO queues (project_id, name) VALUES ($1, 'prop') RETURNING id", project
            )
        )
        for name in ("a", "b"):
            wid = self.run(
                self.conn.fetchval(
                    "INSERT INTO workers (hostname, pid, version, capacity) VALUES ($1, 1, 't', 5) RETURNING id",
                    name,
                )
            )
            self.workers.append(wid)
            self.believed[wid] = {}

    def teardown(self) -> None:
        if self.conn is not None:
            self.run(self.conn.close())
        self.loop.close()

    def _pick(self, worker: int, index: int) -> Fence | None:
        held = sorted(self.believed[self.workers[worker]].items())
        if not held:
            return None
        return held[index % len(held)][1]

    def _forget(self, worker: int, job_id: int) -> None:
        self.believed[self.workers[worker]].pop(job_id, None)

    # ---- operations ----------------------------------------------------------------------

    @rule(n=st.integers(1, 3), max_attempts=st.integers(1, 3))
    def enqueue(self, n: int, max_attempts: int) -> None:
        jobs = [NewJob("prop", {"i": i}, max_attempts=max_attempts) for i in range(n)]
        for made in self.run(enqueue_many(self.conn, self.queue_id, jobs)):
            self.last_status[made.id] = made.status

    @rule(index=st.integers(0, 50))
    def enqueue_dependant(self, index: int) -> None:
        if not self.last_status:
            return
        ids = sorted(self.last_status)
        parent = ids[index % len(ids)]
        # a parent already cancelled/dead-lettered is refused: it can never complete
        with contextlib.suppress(ValidationError):
            made = self.run(enqueue(self.conn, self.queue_id, NewJob("child", depends_on=[parent])))
            self.last_status[made.id] = made.status

    @rule(worker=st.integers(0, 1), limit=st.integers(1, 3), start=st.booleans())
    def claim(self, worker: int, limit: int, start: bool) -> None:
        wid = self.workers[worker]
        got = self.run(claim(self.conn, wid, [self.queue_id], limit, LEASE_MS))
        for job in got:
            assert job.attempt <= job.max_attempts
            self.believed[wid][job.id] = job.fence
        if start and got:
            self.run(mark_running(self.conn, [j.fence for j in got]))

    @rule(worker=st.integers(0, 1))
    def heartbeat(self, worker: int) -> None:
        self.run(heartbeat(self.conn, self.workers[worker], LEASE_MS))

    @rule(worker=st.integers(0, 1), index=st.integers(0, 10))
    def complete(self, worker: int, index: int) -> None:
        fence = self._pick(worker, index)
        if fence is None:
            return
        self.run(complete(self.conn, [Completion(fence, {"ok": True})]))
        self._forget(worker, fence.job_id)

    @rule(
        worker=st.integers(0, 1),
        index=st.integers(0, 10),
        kind=st.sampled_from(["error", "timeout", "unknown_handler", "cancelled"]),
    )
    def fail(self, worker: int, index: int, kind: Any) -> None:
        fence = self._pick(worker, index)
        if fence is None:
            return
        self.run(fail(self.conn, [Failure(fence, "boom", kind=kind)]))
        self._forget(worker, fence.job_id)

    @rule(worker=st.integers(0, 1))
    def worker_dies_and_is_reaped(self, worker: int) -> None:
        # The worker keeps its (now stale) beliefs: later writes from it must be fenced off.
        self.run(
            self.conn.execute(
                "UPDATE jobs SET lock_expires_at = now() - interval '1 s' "
                "WHERE worker_id = $1 AND status IN ('claimed', 'running')",
                self.workers[worker],
            )
        )
        self.run(reap_expired(self.conn))

    @rule(worker=st.integers(0, 1))
    def release_all(self, worker: int) -> None:
        fences = list(self.believed[self.workers[worker]].values())
        if fences:
            self.run(release(self.conn, fences))
            self.believed[self.workers[worker]].clear()

    @rule(index=st.integers(0, 50))
    def cancel(self, index: int) -> None:
        if not self.last_status:
            return
        ids = sorted(self.last_status)
        # completed/dead-lettered jobs refuse: IllegalTransitionError is the correct answer
        with contextlib.suppress(IllegalTransitionError):
            self.run(cancel_job(self.conn, ids[index % len(ids)]))

    @rule()
    def replay(self) -> None:
        self.run(replay_queue_dead_letters(self.conn, self.queue_id))

    @rule()
    def promote(self) -> None:
        self.run(self.conn.execute("UPDATE jobs SET run_at = now() WHERE status = 'scheduled'"))
        self.run(promote_due(self.conn))

    # ---- invariants ----------------------------------------------------------------------

    @invariant()
    def database_agrees(self) -> None:
        if self.conn is None:
            return
        rows = self.run(
            self.conn.fetch(
                """SELECT j.id, j.status::text AS status, j.attempt, j.max_attempts, j.worker_id,
                          j.execution_seq,
                          (SELECT count(*) FROM job_executions e WHERE e.job_id = j.id) AS executions,
                          (SELECT count(DISTINCT execution_seq) FROM job_executions e
                            WHERE e.job_id = j.id) AS distinct_seqs,
                          EXISTS (SELECT 1 FROM dead_letter_jobs d WHERE d.job_id = j.id) AS has_dl
                   FROM jobs j"""
            )
        )
        jobs = {r["id"]: r for r in rows}
        for job_id, r in jobs.items():
            status = JobStatus(r["status"])
            # attempts within bounds
            assert 0 <= r["attempt"] <= r["max_attempts"], dict(r)
            # one execution row per ended attempt, never two for one execution
            ended = r["execution_seq"] - (1 if status in LEASED_STATUSES else 0)
            assert r["executions"] == ended == r["distinct_seqs"], dict(r)
            # dead letters keep their copy
            if status is JobStatus.DEAD_LETTER:
                assert r["has_dl"], dict(r)
            # every move followed the allowed-map
            before = self.last_status.get(job_id)
            if before is not None and before != status:
                assert status in REACHABLE[before], (job_id, before, status)
            self.last_status[job_id] = status
        # dependencies: a waiting job counts exactly its unfinished dependencies, and none of
        # them can be one that will never complete
        deps = self.run(
            self.conn.fetch(
                """SELECT j.id, j.pending_dependencies AS pending,
                          count(*) FILTER (WHERE p.status <> 'completed') AS unfinished,
                          count(*) FILTER (WHERE p.status IN ('cancelled', 'dead_letter')) AS doomed
                   FROM jobs j JOIN job_dependencies d ON d.job_id = j.id
                   JOIN jobs p ON p.id = d.depends_on_id
                   WHERE j.status = 'waiting' GROUP BY j.id"""
            )
        )
        for d in deps:
            assert d["pending"] == d["unfinished"] > 0, dict(d)
            assert d["doomed"] == 0, dict(d)
        # no job held by two live leases
        live: dict[int, int] = {}
        for wid, fences in self.believed.items():
            for job_id, fence in fences.items():
                r = jobs[job_id]
                if (
                    r["status"] in LEASED_STATUSES
                    and r["worker_id"] == wid
                    and r["execution_seq"] == fence.execution_seq
                ):
                    live[job_id] = live.get(job_id, 0) + 1
        assert all(n == 1 for n in live.values()), live


def test_core_state_machine(database_url: str) -> None:
    CoreMachine.database_url = database_url
    run_state_machine_as_test(
        CoreMachine,
        settings=settings(
            max_examples=20,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )
