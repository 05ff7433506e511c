"""Flow control through the API: queue key/rate limits, job concurrency and unique keys, the
project weight (organisation admins only), and GET .../jobs/{id}/explain with each blocker."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from tests.api.project_api import ProjectApi, assert_error, resource_fixtures
from tests.factories import make_project, make_queue

from codity import core
from codity.domain.states import MemberRole

shared_app_fixture, api_fixture = resource_fixtures()


async def _worker(
    api: ProjectApi,
    *queues: dict[str, Any],
    handlers: tuple[str, ...] = ("noop",),
    capacity: int = 5,
) -> uuid.UUID:
    return await core.register_worker(
        api.pool, hostname="h", pid=1, version="t", capacity=capacity,
        queue_ids=[uuid.UUID(q["id"]) for q in queues], queue_names=[q["name"] for q in queues],
        handlers=handlers,
    )  # fmt: skip


async def _job(api: ProjectApi, queue: str, **fields: Any) -> dict[str, Any]:
    r = await api.post("/jobs", {"queue": queue, "handler": "noop", **fields})
    assert r.status_code in (200, 201), r.text
    body: dict[str, Any] = r.json()
    return body


async def _explain(api: ProjectApi, job_id: int) -> dict[str, dict[str, Any]]:
    r = await api.get(f"/jobs/{job_id}/explain")
    assert r.status_code == 200, r.text
    return {b["code"]: b for b in r.json()["blockers"]}


# --- queues ------------------------------------------------------------------------------------


async def test_queue_flow_settings_round_trip(api: ProjectApi) -> None:
    q = await api.queue(
        "flow",
        key_concurrency_limit=2,
        rate_limit={"count": 10, "period_s": 1.5},
        rate_limit_per_key=True,
    )
    assert q["key_concurrency_limit"] == 2
    assert q["rate_limit"] == {"count": 10, "period_s": 1.5}
    assert q["rate_limit_per_key"] is True
    row = await api.pool.fetchrow(
        "SELECT rate_limit_count, rate_limit_period_ms FROM queues WHERE id = $1",
        uuid.UUID(q["id"]),
    )
    assert tuple(row) == (10, 1500)

    r = await api.patch(f"/queues/{q['id']}", {"rate_limit": None, "rate_limit_per_key": False})
    assert r.status_code == 200, r.text
    assert (r.json()["rate_limit"], r.json()["rate_limit_per_key"]) == (None, False)
    assert r.json()["key_concurrency_limit"] == 2  # not in the PATCH: kept
    r = await api.patch(f"/queues/{q['id']}", {"key_concurrency_limit": None})
    assert r.json()["key_concurrency_limit"] is None


async def test_bad_queue_flow_settings_are_refused(api: ProjectApi) -> None:
    for body in (
        {"name": "a", "rate_limit_per_key": True},
        {"name": "b", "rate_limit": {"count": 0, "period_s": 1}},
        {"name": "c", "rate_limit": {"count": 5, "period_s": 0}},
        {"name": "d", "rate_limit": {"count": 5}},
        {"name": "e", "key_concurrency_limit": 0},
    ):
        assert_error(await api.post("/queues", body), 422, "validation_error")
    assert (await api.get("/queues")).json()["items"] == []


async def test_a_patch_is_checked_on_the_queue_it_makes(api: ProjectApi) -> None:
    """QueueCreate refuses rate_limit_per_key without a rate_limit; a PATCH sends only some
    fields, so the same rule is checked on the row it would make (a CHECK, migration 0016)."""
    plain = await api.queue("plain")
    error = assert_error(
        await api.patch(f"/queues/{plain['id']}", {"rate_limit_per_key": True}),
        422,
        "validation_error",
    )
    assert error["message"] == "rate_limit_per_key needs a rate_limit"
    assert error["details"] == {"constraint": "ck_queues_rate_limit_per_key_needs_a_limit"}
    rated = await api.queue(
        "rated", rate_limit={"count": 5, "period_s": 1}, rate_limit_per_key=True
    )
    assert_error(
        await api.patch(f"/queues/{rated['id']}", {"rate_limit": None}), 422, "validation_error"
    )
    stored = await api.pool.fetch(
        "SELECT name, rate_limit_count, rate_limit_per_key FROM queues WHERE project_id = $1 "
        "ORDER BY name",
        api.project_id,
    )
    assert [tuple(r) for r in stored] == [("plain", None, False), ("rated", 5, True)]
    # What makes a consistent queue passes: a limit with the flag, or neither.
    r = await api.patch(
        f"/queues/{plain['id']}",
        {"rate_limit": {"count": 2, "period_s": 1}, "rate_limit_per_key": True},
    )
    assert (r.status_code, r.json()["rate_limit_per_key"]) == (200, True), r.text
    r = await api.patch(f"/queues/{rated['id']}", {"rate_limit": None, "rate_limit_per_key": False})
    assert (r.status_code, r.json()["rate_limit"]) == (200, None), r.text


# --- jobs --------------------------------------------------------------------------------------


async def test_enqueue_with_a_concurrency_key_and_unique_for(api: ProjectApi) -> None:
    await api.queue("jobs")
    body = {"queue": "jobs", "handler": "sync", "payload": {"u": 1}, "concurrency_key": "u-1",
            "unique_for_s": 60}  # fmt: skip
    first = await api.post("/jobs", body)
    again = await api.post("/jobs", body)
    assert first.status_code == 201, first.text
    assert again.status_code == 200, again.text  # the existing job, not a new one
    assert again.json()["id"] == first.json()["id"]
    assert first.json()["concurrency_key"] == "u-1"
    assert first.json()["unique_key"].startswith("sha256:")

    bulk = await api.post("/jobs/bulk", {"queue": "jobs", "jobs": [
        {"handler": "sync", "unique_for_s": 60, "unique_key": "k", "unique_states": ["queued"]},
        {"handler": "sync", "unique_for_s": 60, "unique_key": "k"},
        {"handler": "sync", "payload": {"u": 1}, "unique_for_s": 60},
    ]})  # fmt: skip
    assert bulk.status_code == 201, bulk.text
    made = bulk.json()["jobs"]
    assert [j["created"] for j in made] == [True, False, False]
    assert made[1]["id"] == made[0]["id"]
    assert made[2]["id"] == first.json()["id"]


async def test_bad_flow_fields_on_jobs_are_refused(api: ProjectApi) -> None:
    await api.queue("jobs")
    for extra in (
        {"unique_key": "k"},
        {"unique_states": ["queued"]},
        {"unique_for_s": 0},
        {"unique_for_s": 60, "unique_states": ["nope"]},
        {"unique_for_s": 60, "unique_states": []},
        {"concurrency_key": ""},
        {"concurrency_key": "k" * 256},
    ):
        r = await api.post("/jobs", {"queue": "jobs", "handler": "noop", **extra})
        assert_error(r, 422, "validation_error")
    assert await api.pool.fetchval("SELECT count(*) FROM jobs j JOIN queues q ON q.id = j.queue_id "
                                   "WHERE q.project_id = $1", api.project_id) == 0  # fmt: skip


# --- project weight ----------------------------------------------------------------------------


async def test_org_admins_set_the_weight_api_keys_and_members_cannot(api: ProjectApi) -> None:
    project = f"/api/v1/projects/{api.project_id}"
    r = await api.client.patch(project, json={"weight": 3}, headers=api.headers)
    assert r.status_code == 200, r.text
    assert r.json()["weight"] == 3
    admin = await api.member(MemberRole.ADMIN)
    assert (await api.client.patch(project, json={"weight": 5}, headers=admin)).json()[
        "weight"
    ] == 5

    member = await api.member(MemberRole.MEMBER)
    assert_error(
        await api.client.patch(project, json={"weight": 9}, headers=member), 403, "forbidden"
    )
    made = await api.post("/api-keys", {"name": "ci", "role": "admin"})
    key = made.json()["key"]
    by_key = await api.client.patch(
        project, json={"weight": 9}, headers={"Authorization": f"Bearer {key}"}
    )
    assert_error(by_key, 403, "forbidden")
    renamed = await api.client.patch(
        project, json={"name": "Renamed"}, headers={"Authorization": f"Bearer {key}"}
    )
    assert renamed.status_code == 200, renamed.text  # renaming stays a project admin's
    assert renamed.json()["weight"] == 5
    for bad in ({"weight": 0}, {"weight": 1001}, {}):
        assert_error(await api.client.patch(project, json=bad, headers=api.headers), 422,
                     "validation_error")  # fmt: skip
    assert await api.pool.fetchval("SELECT weight FROM projects WHERE id = $1", api.project_id) == 5


# --- explain -----------------------------------------------------------------------------------


async def test_explain_no_worker_paused_queue_then_claimable(api: ProjectApi) -> None:
    q = await api.queue("ex")
    job = await _job(api, "ex")
    await api.post(f"/queues/{q['id']}/pause")
    found = await _explain(api, job["id"])
    assert set(found) == {"queue_paused", "no_live_worker"}

    await api.post(f"/queues/{q['id']}/resume")
    await _worker(api, q, handlers=("other",))
    found = await _explain(api, job["id"])
    assert set(found) == {"handler_not_registered"}
    assert found["handler_not_registered"]["data"]["handler"] == "noop"

    await _worker(api, q, handlers=("noop",))
    ahead = await _job(api, "ex", priority=5)  # runs first: higher priority
    found = await _explain(api, job["id"])
    assert set(found) == {"claimable"}
    assert found["claimable"]["data"] == {"ahead": 1}
    assert (await _explain(api, ahead["id"]))["claimable"]["data"] == {"ahead": 0}


async def test_explain_a_worker_silent_past_dead_worker_after_ms_is_not_live(
    api: ProjectApi,
) -> None:
    """A crashed worker stays 'active' until the sweep marks it dead, but claims nothing: it
    counts as live only while its last heartbeat is within DEAD_WORKER_AFTER_MS."""
    q = await api.queue("ex")
    job = await _job(api, "ex")
    worker = await _worker(api, q)
    dead_after_ms = api.settings.dead_worker_after_ms

    async def silent_for(ms: int) -> set[str]:
        await api.pool.execute(
            "UPDATE workers SET last_heartbeat_at = now() - $2 * interval '1 millisecond' "
            "WHERE id = $1",
            worker,
            ms,
        )
        return set(await _explain(api, job["id"]))

    assert await silent_for(dead_after_ms - 5_000) == {"claimable"}
    assert await silent_for(dead_after_ms + 1_000) == {"no_live_worker"}
    assert await api.pool.fetchval("SELECT status::text FROM workers WHERE id = $1", worker) == (
        "active"
    )


async def test_explain_scheduled_and_waiting_on_dependencies(api: ProjectApi) -> None:
    q = await api.queue("ex")
    await _worker(api, q)
    later = await _job(api, "ex", delay_s=3600)
    parent = await _job(api, "ex")
    child = await _job(api, "ex", depends_on=[parent["id"], later["id"]])
    found = await _explain(api, later["id"])
    assert set(found) == {"scheduled"}
    assert (
        datetime.fromisoformat(found["scheduled"]["data"]["run_at"]) > datetime.now().astimezone()
    )
    found = await _explain(api, child["id"])
    assert set(found) == {"waiting_on_dependencies"}
    assert found["waiting_on_dependencies"]["data"]["job_ids"] == sorted(
        [parent["id"], later["id"]]
    )


async def test_explain_concurrency_and_key_limits_name_the_jobs_holding_the_slots(
    api: ProjectApi,
) -> None:
    q = await api.queue("lim", concurrency_limit=1, key_concurrency_limit=1)
    worker = await _worker(api, q)
    holder = await _job(api, "lim", concurrency_key="acct")
    waiting = await _job(api, "lim", concurrency_key="acct")
    claimed = await core.claim(api.pool, worker, [uuid.UUID(q["id"])], 5, 30_000)
    assert [j.id for j in claimed] == [holder["id"]]
    found = await _explain(api, waiting["id"])
    assert set(found) == {"concurrency_limit_full", "key_limit_full"}
    assert found["concurrency_limit_full"]["data"] == {
        "limit": 1, "running": 1, "job_ids": [holder["id"]]
    }  # fmt: skip
    assert found["key_limit_full"]["data"] == {
        "key": "acct", "limit": 1, "running": 1, "job_ids": [holder["id"]]
    }  # fmt: skip
    assert await _explain(api, holder["id"]) == {}  # it runs: nothing to explain


async def test_explain_rate_limited_says_when_the_next_start_frees_up(api: ProjectApi) -> None:
    q = await api.queue("rated", rate_limit={"count": 2, "period_s": 3600})
    worker = await _worker(api, q)
    jobs = [await _job(api, "rated") for _ in range(3)]
    claimed = await core.claim(api.pool, worker, [uuid.UUID(q["id"])], 5, 30_000)
    assert len(claimed) == 2
    found = await _explain(api, jobs[2]["id"])
    assert set(found) == {"rate_limited"}
    data = found["rate_limited"]["data"]
    assert (data["count"], data["period_s"], data["per_key"]) == (2, 3600, False)
    next_at = datetime.fromisoformat(data["next_slot_at"])
    assert 3500 < (next_at - datetime.now().astimezone()).total_seconds() <= 3600 * 1.03


async def test_explain_fair_share_shows_other_projects_only_as_counts(api: ProjectApi) -> None:
    other_project = await make_project(api.pool, api.org_id, weight=2)
    theirs = await make_queue(api.pool, other_project, name="theirs")
    ours = await api.queue("ours")
    worker = await core.register_worker(
        api.pool, hostname="h", pid=1, version="t", capacity=2,
        queue_ids=[theirs, uuid.UUID(ours["id"])], queue_names=["theirs", "ours"],
        handlers=["noop"],
    )  # fmt: skip
    await core.enqueue_many(api.pool, theirs, [core.NewJob("noop")] * 2)
    assert len(await core.claim(api.pool, worker, [theirs], 2, 30_000)) == 2
    job = await _job(api, "ours")
    found = await _explain(api, job["id"])
    assert set(found) == {"fair_share"}
    assert found["fair_share"]["data"] == {
        "own": {"in_flight": 0, "weight": 1},
        "others": [{"in_flight": 2, "weight": 2}],
        "capacity": 2,
    }
    assert str(other_project) not in str(found)


async def test_explain_is_the_projects_own(api: ProjectApi) -> None:
    await api.queue("mine")
    job = await _job(api, "mine")
    other_project, other_owner = await api.outsider()
    r = await api.client.get(f"/api/v1/projects/{other_project}/jobs/{job['id']}/explain",
                             headers=other_owner)  # fmt: skip
    assert_error(r, 404, "job_not_found")
    assert_error(await api.get("/jobs/999999999/explain"), 404, "job_not_found")
