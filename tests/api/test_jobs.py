"""Jobs through the API: enqueue (one, bulk, idempotent), lists with filters, detail, logs,
retry and cancel (through codity.core), the enqueue quota, and project scoping."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from tests.api.project_api import ProjectApi, assert_error, resource_fixtures
from tests.factories import make_queue

from codity import core
from codity.domain.states import MemberRole

shared_app_fixture, api_fixture = resource_fixtures()


async def _count_jobs(api: ProjectApi) -> int:
    n: int = await api.pool.fetchval(
        "SELECT count(*) FROM jobs j JOIN queues q ON q.id = j.queue_id WHERE q.project_id = $1",
        api.project_id,
    )
    return n


async def test_enqueue_by_name_or_id_with_defaults(api: ProjectApi) -> None:
    q = await api.queue("mail", default_max_attempts=4, default_timeout_ms=5000)
    by_name = await api.post("/jobs", {"queue": "mail", "handler": "email.send", "priority": 3})
    assert by_name.status_code == 201, by_name.text
    job = by_name.json()
    assert job["queue_id"] == q["id"]
    assert job["queue_name"] == "mail"
    assert job["status"] == "queued"
    assert job["max_attempts"] == 4
    assert job["timeout_ms"] == 5000
    assert job["priority"] == 3
    by_id = await api.post("/jobs", {"queue": q["id"], "handler": "email.send"})
    assert by_id.status_code == 201
    assert by_id.json()["queue_id"] == q["id"]


async def test_delay_and_run_at_schedule_the_job(api: ProjectApi) -> None:
    await api.queue("later")
    delayed = (await api.post("/jobs", {"queue": "later", "handler": "h", "delay_s": 60})).json()
    assert delayed["status"] == "scheduled"
    run_at = datetime.now(UTC) + timedelta(hours=1)
    at = await api.post("/jobs", {"queue": "later", "handler": "h", "run_at": run_at.isoformat()})
    assert at.json()["status"] == "scheduled"
    assert abs(datetime.fromisoformat(at.json()["run_at"]) - run_at) < timedelta(seconds=1)
    both = {"queue": "later", "handler": "h", "delay_s": 1, "run_at": run_at.isoformat()}
    assert_error(await api.post("/jobs", both), 422, "validation_error")


async def test_idempotency_key_field_or_header_returns_the_existing_job(api: ProjectApi) -> None:
    await api.queue("idem")
    body = {"queue": "idem", "handler": "h", "idempotency_key": "order-42"}
    first = await api.post("/jobs", body)
    again = await api.post("/jobs", body)
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]

    header = {**api.headers, "Idempotency-Key": "order-43"}
    one = await api.client.post(
        api.url("/jobs"), json={"queue": "idem", "handler": "h"}, headers=header
    )
    two = await api.client.post(
        api.url("/jobs"), json={"queue": "idem", "handler": "h"}, headers=header
    )
    assert (one.status_code, two.status_code) == (201, 200)
    assert one.json()["id"] == two.json()["id"]
    assert one.json()["idempotency_key"] == "order-43"
    assert await _count_jobs(api) == 2


async def test_dependencies_wait_for_completion(api: ProjectApi) -> None:
    await api.queue("deps")
    parent = (await api.post("/jobs", {"queue": "deps", "handler": "h"})).json()
    child = await api.post("/jobs", {"queue": "deps", "handler": "h", "depends_on": [parent["id"]]})
    assert child.json()["status"] == "waiting"
    detail = (await api.get(f"/jobs/{child.json()['id']}")).json()
    assert detail["depends_on"] == [parent["id"]]
    assert detail["pending_dependencies"] == 1


async def test_bulk_is_atomic_with_one_batch_id(api: ProjectApi) -> None:
    await api.queue("a")
    await api.queue("b")
    body = {
        "queue": "a",
        "jobs": [{"handler": "h", "payload": {"i": i}} for i in range(3)]
        + [{"handler": "h", "queue": "b"}],
    }
    r = await api.post("/jobs/bulk", body)
    assert r.status_code == 201, r.text
    result = r.json()
    assert len(result["jobs"]) == 4
    assert all(j["created"] for j in result["jobs"])
    batch = (await api.get("/jobs", params={"batch_id": result["batch_id"]})).json()
    assert sorted(j["id"] for j in batch["items"]) == sorted(j["id"] for j in result["jobs"])
    assert {j["queue_name"] for j in batch["items"]} == {"a", "b"}

    # One bad job (depends on a job that does not exist): nothing of the batch is stored.
    before = await _count_jobs(api)
    bad = {"queue": "a", "jobs": [{"handler": "h"}, {"handler": "h", "depends_on": [10**12]}]}
    assert_error(await api.post("/jobs/bulk", bad), 422, "validation_error")
    assert await _count_jobs(api) == before


async def test_list_filters_and_keyset_pagination(api: ProjectApi) -> None:
    await api.queue("f1")
    await api.queue("f2")
    ids = []
    for i in range(5):
        body = {
            "queue": "f1" if i % 2 else "f2",
            "handler": f"h{i % 2}",
            "idempotency_key": f"key-{i}",
        }
        ids.append((await api.post("/jobs", body)).json()["id"])
    await api.post(f"/jobs/{ids[0]}/cancel")

    async def listed(**params: object) -> list[int]:
        r = await api.get("/jobs", params=params)
        assert r.status_code == 200, r.text
        return [j["id"] for j in r.json()["items"]]

    assert await listed() == sorted(ids, reverse=True)
    assert await listed(queue="f1") == [ids[3], ids[1]]
    assert await listed(handler="h0") == [ids[4], ids[2], ids[0]]
    assert await listed(status="cancelled") == [ids[0]]
    assert await listed(status=["cancelled", "queued"]) == sorted(ids, reverse=True)
    assert await listed(q="key-3") == [ids[3]]
    assert await listed(q=str(ids[2])) == [ids[2]]
    assert await listed(q="key_") == []  # LIKE wildcards are matched literally
    future = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    assert await listed(created_after=future) == []
    assert await listed(created_before=future) == sorted(ids, reverse=True)

    pages, cursor = [], None
    while True:
        r = (
            await api.get("/jobs", params={"limit": 2, **({"cursor": cursor} if cursor else {})})
        ).json()
        pages.append([j["id"] for j in r["items"]])
        cursor = r["next_cursor"]
        if not cursor:
            break
    assert [i for p in pages for i in p] == sorted(ids, reverse=True)
    assert all(len(p) <= 2 for p in pages)


async def test_detail_shows_payload_executions_and_logs(api: ProjectApi) -> None:
    q = await api.queue("detail", default_max_attempts=2)
    job = (
        await api.post(
            "/jobs", {"queue": "detail", "handler": "h", "payload": {"to": "a@b.c", "n": 1}}
        )
    ).json()
    queue_id = uuid.UUID(q["id"])
    worker = await core.register_worker(
        api.pool,
        hostname="h",
        pid=1,
        version="t",
        capacity=1,
        queue_ids=[queue_id],
        queue_names=["detail"],
    )
    (first,) = await core.claim(api.pool, worker, [queue_id], 1, 30_000)
    await core.mark_running(api.pool, [first.fence])
    await core.append_logs(
        api.pool, first.fence, [core.LogEntry("info", "sending", {"step": 1}, None)]
    )
    await core.fail(api.pool, [core.Failure(first.fence, error="smtp down")])
    await api.pool.execute(
        "UPDATE jobs SET status = 'queued', run_at = now() WHERE id = $1", job["id"]
    )
    (second,) = await core.claim(api.pool, worker, [queue_id], 1, 30_000)
    await core.mark_running(api.pool, [second.fence])
    await core.report_progress(api.pool, second.fence, 50, "half")
    await core.complete(api.pool, [core.Completion(second.fence, result={"sent": True})])

    d = (await api.get(f"/jobs/{job['id']}")).json()
    assert d["status"] == "completed"
    assert d["payload"] == {"to": "a@b.c", "n": 1}
    assert d["payload_keys"] == ["n", "to"]
    assert d["payload_size"] > 0
    assert d["result"] == {"sent": True}
    assert [(e["execution_seq"], e["status"]) for e in d["executions"]] == [
        (1, "failed"),
        (2, "completed"),
    ]
    assert d["executions"][0]["error"] == "smtp down"
    assert d["executions"][1]["duration_ms"] >= 0
    assert [(entry["level"], entry["message"], entry["fields"]) for entry in d["logs"]] == [
        ("info", "sending", {"step": 1})
    ]
    logs = (await api.get(f"/jobs/{job['id']}/logs")).json()
    assert [entry["message"] for entry in logs["items"]] == ["sending"]
    assert logs["next_cursor"] is None


async def test_cancel_and_retry_go_through_the_lifecycle(api: ProjectApi) -> None:
    await api.queue("ops")
    job = (await api.post("/jobs", {"queue": "ops", "handler": "h"})).json()
    cancelled = await api.post(f"/jobs/{job['id']}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    retried = await api.post(f"/jobs/{job['id']}/retry")
    assert retried.json()["status"] == "queued"
    assert retried.json()["attempt"] == 0
    # A queued job cannot be retried: that would run it twice.
    assert_error(await api.post(f"/jobs/{job['id']}/retry"), 409, "illegal_transition")


async def test_unknown_and_foreign_jobs_are_not_found(api: ProjectApi) -> None:
    await api.queue("mine")
    other_project, other_headers = await api.outsider()
    other_queue = await make_queue(api.pool, other_project, name="theirs")
    theirs = (
        await api.client.post(
            f"/api/v1/projects/{other_project}/jobs",
            json={"queue": "theirs", "handler": "h"},
            headers=other_headers,
        )
    ).json()
    for path in (f"/jobs/{theirs['id']}", f"/jobs/{theirs['id']}/logs"):
        assert_error(await api.get(path), 404, "job_not_found")
    assert_error(await api.post(f"/jobs/{theirs['id']}/cancel"), 404, "job_not_found")
    status = await api.pool.fetchval("SELECT status::text FROM jobs WHERE id = $1", theirs["id"])
    assert status == "queued"
    # Their queue, named by id or by name from my project: not found, nothing stored.
    for queue in (str(other_queue), "theirs"):
        assert_error(
            await api.post("/jobs", {"queue": queue, "handler": "h"}), 404, "queue_not_found"
        )
    assert await _count_jobs(api) == 0


async def test_viewer_cannot_enqueue_member_can(api: ProjectApi) -> None:
    await api.queue("roles")
    body = {"queue": "roles", "handler": "h"}
    viewer = await api.member(MemberRole.VIEWER)
    member = await api.member(MemberRole.MEMBER)
    assert_error(
        await api.client.post(api.url("/jobs"), json=body, headers=viewer), 403, "forbidden"
    )
    assert (await api.client.post(api.url("/jobs"), json=body, headers=member)).status_code == 201


async def test_the_1001st_enqueue_in_a_minute_is_refused(api: ProjectApi) -> None:
    """The default limit (1,000 per minute per project): a bulk of 1,000 fits exactly; the next
    single enqueue gets 429 with Retry-After and is not stored; a bulk over the rest is refused
    whole."""
    assert api.settings.rate_limit_enqueue_per_minute == 1000
    await api.queue("flood")
    r = await api.post("/jobs/bulk", {"queue": "flood", "jobs": [{"handler": "h"}] * 1000})
    assert r.status_code == 201, r.text
    refused = await api.post("/jobs", {"queue": "flood", "handler": "h"})
    error = assert_error(refused, 429, "rate_limited")
    assert int(refused.headers["Retry-After"]) >= 1
    assert error["details"]["limit"] == 1000
    assert_error(
        await api.post("/jobs/bulk", {"queue": "flood", "jobs": [{"handler": "h"}]}),
        429,
        "rate_limited",
    )
    assert await _count_jobs(api) == 1000


async def test_a_bulk_over_the_limit_stores_nothing(api: ProjectApi) -> None:
    await api.queue("big")
    r = await api.post("/jobs/bulk", {"queue": "big", "jobs": [{"handler": "h"}] * 600})
    assert r.status_code == 201
    assert_error(
        await api.post("/jobs/bulk", {"queue": "big", "jobs": [{"handler": "h"}] * 401}),
        429,
        "rate_limited",
    )
    assert await _count_jobs(api) == 600
    # What is left of the minute's quota is still usable.
    assert (
        await api.post("/jobs/bulk", {"queue": "big", "jobs": [{"handler": "h"}] * 400})
    ).status_code == 201
    assert await _count_jobs(api) == 1000


async def test_dependencies_and_policies_of_other_tenants_are_unknown(api: ProjectApi) -> None:
    await api.queue("mine")
    other_project, other_headers = await api.outsider()
    await make_queue(api.pool, other_project, name="theirs")
    theirs = await api.client.post(
        f"/api/v1/projects/{other_project}/jobs",
        json={"queue": "theirs", "handler": "h"},
        headers=other_headers,
    )
    policy = await api.client.post(
        f"/api/v1/projects/{other_project}/retry-policies",
        json={"name": "p"},
        headers=other_headers,
    )
    r = await api.post(
        "/jobs", {"queue": "mine", "handler": "h", "depends_on": [theirs.json()["id"]]}
    )
    assert_error(r, 422, "validation_error")
    r = await api.post(
        "/jobs", {"queue": "mine", "handler": "h", "retry_policy_id": policy.json()["id"]}
    )
    assert_error(r, 422, "validation_error")
    assert await _count_jobs(api) == 0
