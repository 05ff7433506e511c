"""A stateful property test: random operation sequences against the real database.

Hypothesis drives enqueue (with and without dependencies), claim, heartbeat, complete, fail, reap, release, cancel, replay and
promote from two workers (one of which keeps acting on fences it may have lost), and after every
step checks the invariants:
- no job is held by two live leases: of every fence ever handed out (stale ones included), the
  database's own fenced completion accepts exactly the live lease's fence and no other;
- attempt never goes above max_attempts (nor below 0);
- every ended attempt has exactly one execution row (terminal jobs have all of theirs);
- every status change is one edge of the allowed-map: a trigger added for this test records
  each change the database makes (old, new), so a move through an unseen intermediate state
  cannot pass for a sequence of allowed ones;
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

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from tests.factories import make_queue, make_tenant, make_worker

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
    outcomes,
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


#: Where a new job may start.
INITIAL_STATUSES = frozenset({JobStatus.WAITING, JobStatus.SCHEDULED, JobStatus.QUEUED})

#: Test instrumentation (never in the schema): every status a job takes, in order.
RECORD_MOVES = (
    "CREATE TABLE IF NOT EXISTS test_status_moves ("
    " seq bigserial PRIMARY KEY, job_id bigint NOT NULL, old_status text, new_status text NOT NULL)",
    """CREATE OR REPLACE FUNCTION test_record_status_move() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         INSERT INTO test_status_moves (job_id, old_status, new_status)
         VALUES (NEW.id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status::text END, NEW.status::text);
         RETURN NULL;
       END $$""",
    "CREATE OR REPLACE TRIGGER test_status_moves_update AFTER UPDATE OF status ON jobs FOR EACH ROW"
    " WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION test_record_status_move()",
    "CREATE OR REPLACE TRIGGER test_status_moves_insert AFTER INSERT ON jobs FOR EACH ROW"
    " EXECUTE FUNCTION test_record_status_move()",
)


class _Probe(Exception):
    """Raised to roll back a probing write."""


class CoreMachine(RuleBasedStateMachine):
    database_url: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.conn: Any = None
        self.queue_id = uuid.uuid4()
        self.project_id = uuid.uuid4()
        self.workers: list[uuid.UUID] = []
        self.believed: dict[uuid.UUID, dict[int, Fence]] = {}  # what each worker thinks it holds
        self.issued: list[Fence] = []  # every fence any claim ever handed out, stale or not
        self.last_status: dict[int, JobStatus] = {}
        self.moves_seen = 0

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    @initialize()
    def setup(self) -> None:
        self.conn = self.run(connect(self.database_url))
        for statement in RECORD_MOVES:
            self.run(self.conn.execute(statement))
        self.run(
            self.conn.execute(
                "TRUNCATE jobs, job_dependencies, dead_letter_jobs, job_executions, workers, queues, "
                "projects, organizations, test_status_moves CASCADE"
            )
        )
        tenant = self.run(make_tenant(self.conn))
        self.project_id = tenant.project_id
        self.queue_id = self.run(make_queue(self.conn, tenant.project_id, name="prop"))
        for name in ("a", "b"):
            wid = self.run(make_worker(self.conn, hostname=name))
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
            self.issued.append(job.fence)
        if start and got:
            self.run(mark_running(self.conn, [j.fence for j in got]))

    @rule(worker=st.integers(0, 1))
    def heartbeat(self, worker: int) -> None:
        # the fences it believes it holds (some may be stale: those are reported lost)
        wid = self.workers[worker]
        self.run(heartbeat(self.conn, wid, LEASE_MS, list(self.believed[wid].values())))

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
    def stalls_then_reclaims(self, worker: int) -> None:
        """The worker stalls past its leases, they are reaped, and the SAME worker claims again
        (usually getting its own jobs back): its old fences differ from the new ones only in
        execution_seq."""
        wid = self.workers[worker]
        holding = self.run(
            self.conn.fetchval(
                "SELECT count(*) FROM jobs WHERE worker_id = $1 AND status IN ('claimed', 'running')",
                wid,
            )
        )
        if not holding:  # hold something first, so that every draw of this rule tests the case
            self.enqueue(1, 3)
            self.claim(worker, 1, False)
        self.worker_dies_and_is_reaped(worker)
        self.claim(worker, 3, False)

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
            self.run(cancel_job(self.conn, self.project_id, ids[index % len(ids)]))

    @rule()
    def replay(self) -> None:
        self.run(replay_queue_dead_letters(self.conn, self.project_id, self.queue_id))

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

    @invariant()
    def every_status_change_is_one_allowed_edge(self) -> None:
        if self.conn is None:
            return
        moves = self.run(
            self.conn.fetch(
                "SELECT seq, job_id, old_status, new_status FROM test_status_moves"
                " WHERE seq > $1 ORDER BY seq",
                self.moves_seen,
            )
        )
        for m in moves:
            new = JobStatus(m["new_status"])
            if m["old_status"] is None:
                assert new in INITIAL_STATUSES, dict(m)
            else:
                assert new in ALLOWED_TRANSITIONS[JobStatus(m["old_status"])], dict(m)
            self.moves_seen = m["seq"]

    async def _accepted(self, fence: Fence) -> bool:
        """Would the database's fenced completion accept this fence now? Asked for real, then
        rolled back."""
        try:
            async with self.conn.transaction():
                result = await complete(self.conn, [Completion(fence, {"probe": True})])
                raise _Probe(bool(result.applied))
        except _Probe as probe:
            return bool(probe.args[0])

    @invariant()
    def no_job_is_held_by_two_live_leases(self) -> None:
        if self.conn is None:
            return
        accepted: dict[int, list[Fence]] = {}
        for fence in self.issued:
            if self.run(self._accepted(fence)):
                accepted.setdefault(fence.job_id, []).append(fence)
        leased = {
            r["id"]: (r["worker_id"], r["execution_seq"])
            for r in self.run(
                self.conn.fetch(
                    "SELECT id, worker_id, execution_seq FROM jobs"
                    " WHERE status IN ('claimed', 'running')"
                )
            )
        }
        for job_id, fences in accepted.items():
            assert len(fences) == 1, f"job {job_id} accepts writes from {fences}"
            assert job_id in leased, f"job {job_id} is not leased yet accepts {fences}"
            assert leased[job_id] == (fences[0].worker_id, fences[0].execution_seq), (
                f"job {job_id} is leased as {leased[job_id]} but accepts {fences}"
            )
        # every leased job was claimed through this machine, so its live fence was issued
        assert set(leased) == set(accepted), (leased, accepted)


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


# ---- the invariants can fail: each meets a mutant it must catch ----------------------------
#
# An invariant that cannot fail proves nothing (the earlier live-lease check, one believed fence
# per worker and job, stayed green with execution_seq deleted from the fenced completion; the
# earlier transition check, against the transitive closure of the map, accepted queued ->
# completed). Each check below is driven through a fixed sequence twice: against the real
# database it holds, against a mutant it fails.

#: The database made to take an edge that is not in the map but is reachable through it
#: (queued -> claimed -> completed): a cancel of a queued job lands on completed.
ILLEGAL_EDGE = (
    "ALTER TABLE jobs DISABLE TRIGGER jobs_lifecycle",
    """CREATE OR REPLACE FUNCTION test_mutant_edge() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF OLD.status = 'queued' AND NEW.status = 'cancelled' THEN NEW.status := 'completed'; END IF;
         RETURN NEW;
       END $$""",
    "CREATE OR REPLACE TRIGGER test_mutant_edge BEFORE UPDATE OF status ON jobs FOR EACH ROW"
    " EXECUTE FUNCTION test_mutant_edge()",
)


def _machine(database_url: str) -> CoreMachine:
    CoreMachine.database_url = database_url
    machine = CoreMachine()
    machine.setup()
    return machine


@pytest.mark.parametrize("mutant", [False, True], ids=["real", "mutant"])
def test_live_lease_invariant_fails_when_completion_ignores_execution_seq(
    database_url: str, monkeypatch: pytest.MonkeyPatch, mutant: bool
) -> None:
    if mutant:
        real = outcomes.sql
        fenced = "AND j.worker_id = f.worker_id AND j.execution_seq = f.seq"
        assert fenced in real("complete_jobs")
        monkeypatch.setattr(
            outcomes,
            "sql",
            lambda name: (
                real(name).replace(fenced, "AND j.worker_id = f.worker_id", 1)
                if name == "complete_jobs"
                else real(name)
            ),
        )
    machine = _machine(database_url)
    try:
        machine.enqueue(1, 3)
        machine.claim(0, 1, False)
        machine.stalls_then_reclaims(0)  # worker a now holds seq 1 (stale) and seq 2 (live)
        assert len({f.execution_seq for f in machine.issued}) == 2
        if mutant:
            with pytest.raises(AssertionError, match="accepts writes from"):
                machine.no_job_is_held_by_two_live_leases()
        else:
            machine.no_job_is_held_by_two_live_leases()
    finally:
        machine.teardown()


@pytest.mark.parametrize("mutant", [False, True], ids=["real", "mutant"])
def test_edge_invariant_fails_on_a_transition_only_the_closure_allows(
    database_url: str, mutant: bool
) -> None:
    machine = _machine(database_url)
    try:
        for statement in ILLEGAL_EDGE if mutant else ():
            machine.run(machine.conn.execute(statement))
        machine.enqueue(1, 1)
        machine.cancel(0)
        if mutant:
            with pytest.raises(AssertionError, match=r"'queued'.*'completed'"):
                machine.every_status_change_is_one_allowed_edge()
        else:
            machine.every_status_change_is_one_allowed_edge()
    finally:
        machine.teardown()
