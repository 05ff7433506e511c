"""Draining a queue: no new jobs, the ones it has finish, then it pauses itself."""

from __future__ import annotations

import uuid

from tests.api.project_api import ProjectApi, assert_error, resource_fixtures

from codity import core
from codity.domain.states import MemberRole

shared_app_fixture, api_fixture = resource_fixtures()


async def test_a_draining_queue_refuses_new_jobs_finishes_its_own_then_pauses(
    api: ProjectApi,
) -> None:
    queue = await api.queue("retiring")
    queue_id = uuid.UUID(queue["id"])
    job = (await api.post("/jobs", {"queue": "retiring", "handler": "noop"})).json()
    r = await api.post(f"/queues/{queue_id}/drain")
    assert r.status_code == 200, r.text
    assert r.json()["draining_since"] is not None
    assert not r.json()["is_paused"]  # workers still claim what it has
    assert_error(
        await api.post("/jobs", {"queue": "retiring", "handler": "noop"}), 409, "queue_draining"
    )
    bulk = await api.post("/jobs/bulk", {"queue": "retiring", "jobs": [{"handler": "noop"}]})
    assert_error(bulk, 409, "queue_draining")
    # Not empty yet: the drain goes on.
    assert await core.finish_drains(api.pool) == []
    await core.cancel_job(api.pool, api.project_id, job["id"])
    assert queue_id in await core.finish_drains(api.pool)
    after = (await api.get(f"/queues/{queue_id}")).json()
    assert after["is_paused"] is True
    assert after["draining_since"] is None
    # Resume: it takes jobs again.
    assert (await api.post(f"/queues/{queue_id}/resume")).status_code == 200
    assert (await api.post("/jobs", {"queue": "retiring", "handler": "noop"})).status_code == 201


async def test_resume_ends_a_drain_and_viewers_cannot_drain(api: ProjectApi) -> None:
    queue_id = (await api.queue())["id"]
    await api.post(f"/queues/{queue_id}/drain")
    assert (await api.post(f"/queues/{queue_id}/resume")).json()["draining_since"] is None
    viewer = await api.member(MemberRole.VIEWER)
    r = await api.client.post(api.url(f"/queues/{queue_id}/drain"), headers=viewer)
    assert_error(r, 403, "forbidden")
    assert_error(await api.post(f"/queues/{uuid.uuid4()}/drain"), 404, "queue_not_found")
