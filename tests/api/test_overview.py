"""The project overview: totals, throughput, workers, dead letters and health signals."""

from __future__ import annotations

import uuid

from tests.api.project_api import ProjectApi, resource_fixtures

from codity import core
from codity.domain.states import WorkerStatus

shared_app_fixture, api_fixture = resource_fixtures()


async def test_overview_counts_and_health(api: ProjectApi) -> None:
    empty = (await api.get("/overview")).json()
    assert empty["queues"] == 0
    assert empty["health"]["database_ok"] is True
    assert empty["health"]["oldest_queued_age_s"] is None
    assert empty["health"]["scheduler_ok"] is True

    q = uuid.UUID((await api.queue("o"))["id"])
    await api.queue("p")
    await api.post(f"/queues/{(await api.queue('paused'))['id']}/pause")
    for i in range(4):
        await api.post(
            "/jobs", {"queue": "o", "handler": "h", "max_attempts": 1, "payload": {"i": i}}
        )
    worker = await core.register_worker(
        api.pool, hostname="h", pid=1, version="t", capacity=4, queue_ids=[q], queue_names=["o"]
    )
    dead = await core.register_worker(
        api.pool, hostname="d", pid=2, version="t", capacity=1, queue_ids=[q], queue_names=["o"]
    )
    await core.set_worker_status(api.pool, dead, WorkerStatus.DEAD)
    jobs = await core.claim(api.pool, worker, [q], 3, 30_000)
    await core.complete(api.pool, [core.Completion(jobs[0].fence)])
    await core.fail(api.pool, [core.Failure(jobs[1].fence, error="x")])
    # The remaining queued job has waited a while; a delayed job is overdue by ten minutes.
    await api.pool.execute(
        "UPDATE jobs SET run_at = now() - interval '2 minutes' WHERE status = 'queued' AND queue_id = $1",
        q,
    )
    overdue = await api.post("/jobs", {"queue": "o", "handler": "h", "delay_s": 3600})
    await api.pool.execute(
        "UPDATE jobs SET run_at = now() - interval '10 minutes' WHERE id = $1", overdue.json()["id"]
    )

    o = (await api.get("/overview")).json()
    assert o["queues"] == 3
    assert o["paused_queues"] == 1
    assert o["totals"]["completed"] == 1
    assert o["totals"]["dead_letter"] == 1
    assert o["totals"]["claimed"] == 1
    assert o["totals"]["queued"] == 1
    assert o["totals"]["scheduled"] == 1
    assert len(o["throughput"]) == 60
    assert sum(b["completed"] for b in o["throughput"]) == 1
    assert sum(b["failed"] for b in o["throughput"]) == 1
    assert o["workers"] == {"active": 1, "draining": 0, "stopped": 0, "dead": 1}
    assert o["dead_letters"] == 1
    assert 110 <= o["health"]["oldest_queued_age_s"] <= 300
    assert o["health"]["scheduler_lag_s"] >= 590
    assert o["health"]["scheduler_ok"] is False  # ten minutes overdue > three 10 s ticks
