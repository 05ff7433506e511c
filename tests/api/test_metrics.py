"""/metrics: Prometheus text derived from the database at scrape time."""

from __future__ import annotations

import uuid

from prometheus_client.parser import text_string_to_metric_families
from tests.api.project_api import ProjectApi, resource_fixtures

from codity import core
from codity.domain.states import WorkerStatus

shared_app_fixture, api_fixture = resource_fixtures()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_metrics_reflect_the_database(api: ProjectApi) -> None:
    q = await api.queue("metered")
    queue_id = uuid.UUID(q["id"])
    labels = (("queue", "metered"), ("queue_id", q["id"]))
    for _ in range(4):
        await api.post("/jobs", {"queue": "metered", "handler": "h", "max_attempts": 1})
    worker = await core.register_worker(
        api.pool,
        hostname="h",
        pid=1,
        version="t",
        capacity=4,
        queue_ids=[queue_id],
        queue_names=["metered"],
    )
    jobs = await core.claim(api.pool, worker, [queue_id], 4, 30_000)
    await core.mark_running(api.pool, [j.fence for j in jobs[:3]])
    await core.complete(api.pool, [core.Completion(jobs[0].fence)])
    await core.fail(api.pool, [core.Failure(jobs[1].fence, error="x")])
    # jobs[2] still running; jobs[3] claimed, then its lease expires and the reaper takes it back.
    await api.pool.execute(
        "UPDATE jobs SET lock_expires_at = now() - interval '1 second' WHERE id = $1", jobs[3].id
    )
    assert await core.reap_expired(api.pool) == [jobs[3].id]
    stopped = await core.register_worker(
        api.pool, hostname="s", pid=2, version="t", capacity=1, queue_ids=[], queue_names=[]
    )
    await core.set_worker_status(api.pool, stopped, WorkerStatus.STOPPED)

    api.settings.metrics_token = "scrape-me"  # the app's own settings object (shared app)
    try:
        r = await api.client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    finally:
        api.settings.metrics_token = None
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    m = _samples(r.text)
    assert m[("codity_queue_depth", (*labels, ("status", "completed")))] == 1
    assert m[("codity_queue_depth", (*labels, ("status", "dead_letter")))] == 1
    assert m[("codity_queue_depth", (*labels, ("status", "running")))] == 1
    assert m[("codity_queue_depth", (*labels, ("status", "queued")))] == 1
    assert m[("codity_queue_depth", (*labels, ("status", "waiting")))] == 0
    assert m[("codity_queue_paused", labels)] == 0
    assert m[("codity_jobs_started_total", labels)] == 3  # two finished attempts + one running
    assert m[("codity_jobs_completed_total", labels)] == 1
    assert m[("codity_jobs_failed_total", labels)] == 1
    assert m[("codity_jobs_dead_lettered_total", labels)] == 1
    assert m[("codity_lease_expiries_total", labels)] == 1
    assert m[("codity_workers", (("status", "stopped"),))] >= 1
    assert m[("codity_workers", (("status", "active"),))] >= 1
    # Histograms: every finished attempt that started is counted once, buckets are cumulative.
    assert m[("codity_job_run_seconds_count", ())] >= 2
    assert (
        m[("codity_job_run_seconds_bucket", (("le", "+Inf"),))]
        == m[("codity_job_run_seconds_count", ())]
    )
    buckets = [
        v for (name, lab), v in m.items() if name == "codity_job_claim_to_start_seconds_bucket"
    ]
    assert buckets == sorted(buckets)
    assert m[("codity_job_claim_to_start_seconds_count", ())] >= 2
