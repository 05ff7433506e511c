"""Workers: only those serving the caller's queues; uptime frozen once dead; in-flight counts."""

from __future__ import annotations

import uuid

from tests.api.project_api import ProjectApi, assert_error, resource_fixtures
from tests.factories import make_queue

from codity import core
from codity.domain.states import MemberRole, WorkerStatus

shared_app_fixture, api_fixture = resource_fixtures()


async def _worker(api: ProjectApi, queue_ids: list[uuid.UUID], hostname: str) -> uuid.UUID:
    return await core.register_worker(
        api.pool,
        hostname=hostname,
        pid=42,
        version="t",
        capacity=8,
        queue_ids=queue_ids,
        queue_names=[],
    )


async def test_org_and_project_lists_show_only_my_queues(api: ProjectApi) -> None:
    mine = uuid.UUID((await api.queue("mine"))["id"])
    other_project, other_headers = await api.outsider()
    theirs = await make_queue(api.pool, other_project, name="theirs")
    shared = await _worker(api, [mine, theirs], "shared-host")
    await _worker(api, [theirs], "their-host")

    r = await api.client.get("/api/v1/workers", headers=api.headers)
    assert r.status_code == 200, r.text
    (w,) = r.json()["items"]
    assert w["id"] == str(shared)
    assert w["hostname"] == "shared-host"
    assert w["pid"] == 42
    assert w["capacity"] == 8
    assert [q["name"] for q in w["queues"]] == ["mine"]  # their queue is not shown
    project_list = (await api.get("/workers")).json()["items"]
    assert [x["id"] for x in project_list] == [str(shared)]

    theirs_view = (await api.client.get("/api/v1/workers", headers=other_headers)).json()["items"]
    assert {x["hostname"] for x in theirs_view} == {"shared-host", "their-host"}


async def test_in_flight_heartbeat_age_and_frozen_uptime(api: ProjectApi) -> None:
    q = uuid.UUID((await api.queue("w"))["id"])
    worker = await _worker(api, [q], "h1")
    for _ in range(3):
        await api.post("/jobs", {"queue": "w", "handler": "h"})
    await core.claim(api.pool, worker, [q], 2, 30_000)
    await api.pool.execute(
        "UPDATE workers SET started_at = now() - interval '1 hour', last_heartbeat_at = now() - interval '90 seconds' WHERE id = $1",
        worker,
    )
    (w,) = (await api.get("/workers")).json()["items"]
    assert w["in_flight"] == 2
    assert w["status"] == "active"
    assert 3590 <= w["uptime_s"] <= 3700
    assert 89 <= w["heartbeat_age_s"] <= 200

    await core.set_worker_status(api.pool, worker, WorkerStatus.DEAD)
    await api.pool.execute(
        "UPDATE workers SET stopped_at = started_at + interval '10 minutes' WHERE id = $1", worker
    )
    (dead,) = (await api.get("/workers", params={"status": "dead"})).json()["items"]
    assert dead["uptime_s"] == 600  # frozen at stopped_at, not growing with now()
    assert (await api.get("/workers", params={"status": "active"})).json()["items"] == []


async def test_org_list_is_for_people_project_list_also_for_keys(api: ProjectApi) -> None:
    """/workers is org-scoped and acts for a person (a viewer may read it); an API key, bound to
    one project, reads that project's workers instead."""
    viewer = await api.member(MemberRole.VIEWER)
    assert (await api.client.get("/api/v1/workers", headers=viewer)).status_code == 200
    assert_error(await api.client.get("/api/v1/workers"), 401, "unauthorized")
    created = await api.post("/api-keys", {"name": "ci", "role": "viewer"})
    assert created.status_code == 201, created.text
    key = {"Authorization": f"Bearer {created.json()['key']}"}
    assert_error(await api.client.get("/api/v1/workers", headers=key), 403, "forbidden")
    assert (await api.client.get(api.url("/workers"), headers=key)).status_code == 200
