"""Queues: CRUD, pause/resume through core, live depth, statistics, project scoping."""

from __future__ import annotations

import uuid

from tests.api.project_api import ProjectApi, assert_error, resource_fixtures

from codity import core
from codity.domain.states import MemberRole

shared_app_fixture, api_fixture = resource_fixtures()


async def test_create_read_update_delete(api: ProjectApi) -> None:
    policy = (await api.post("/retry-policies", {"name": "fast", "max_attempts": 5})).json()
    q = await api.queue("emails", concurrency_limit=4, retry_policy_id=policy["id"])
    assert q["name"] == "emails"
    assert q["concurrency_limit"] == 4
    assert not q["is_paused"]
    assert q["retry_policy"] == {
        "id": policy["id"], "name": "fast", "strategy": "exponential", "max_attempts": 5
    }  # fmt: skip
    assert q["depth"]["queued"] == 0
    assert q["claimable"] == 0

    r = await api.patch(f"/queues/{q['id']}", {"concurrency_limit": None, "priority": 7})
    assert r.status_code == 200, r.text
    assert r.json()["concurrency_limit"] is None
    assert r.json()["priority"] == 7
    assert r.json()["retry_policy"]["id"] == policy["id"]  # untouched: absent from the PATCH

    assert (await api.get(f"/queues/{q['id']}")).json()["priority"] == 7
    assert (await api.delete(f"/queues/{q['id']}")).status_code == 204
    assert_error(await api.get(f"/queues/{q['id']}"), 404, "queue_not_found")


async def test_duplicate_name_is_a_conflict(api: ProjectApi) -> None:
    await api.queue("reports")
    assert_error(await api.post("/queues", {"name": "reports"}), 409, "name_taken")


async def test_list_is_keyset_paginated_by_name(api: ProjectApi) -> None:
    names = sorted(f"q{i}-{uuid.uuid4().hex[:4]}" for i in range(5))
    for name in names:
        await api.queue(name)
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await api.get("/queues", params=params)).json()
        seen += [q["name"] for q in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == names
    assert_error(await api.get("/queues", params={"cursor": "garbage!"}), 422, "invalid_cursor")


async def test_depth_claimable_and_pause(api: ProjectApi) -> None:
    q = await api.queue("work")
    for i in range(3):
        r = await api.post("/jobs", {"queue": "work", "handler": "noop", "payload": {"i": i}})
        assert r.status_code == 201, r.text
    await api.post("/jobs", {"queue": "work", "handler": "noop", "delay_s": 3600})

    listed = (await api.get("/queues")).json()["items"][0]
    assert listed["depth"]["queued"] == 3
    assert listed["depth"]["scheduled"] == 1
    assert listed["claimable"] == 3
    assert listed["running"] == 0

    paused = await api.post(f"/queues/{q['id']}/pause")
    assert paused.status_code == 200
    assert paused.json()["is_paused"] is True
    assert paused.json()["claimable"] == 0  # paused: nothing a worker could take
    worker = await core.register_worker(
        api.pool, hostname="h", pid=1, version="t", capacity=5, queue_ids=[uuid.UUID(q["id"])],
        queue_names=["work"],
    )  # fmt: skip
    assert await core.claim(api.pool, worker, [uuid.UUID(q["id"])], 10, 30_000) == []

    resumed = await api.post(f"/queues/{q['id']}/resume")
    assert resumed.json()["is_paused"] is False
    assert resumed.json()["claimable"] == 3
    claimed = await core.claim(api.pool, worker, [uuid.UUID(q["id"])], 2, 30_000)
    assert len(claimed) == 2
    assert (await api.get(f"/queues/{q['id']}")).json()["running"] == 2


async def test_stats_throughput_and_percentiles(api: ProjectApi) -> None:
    q = await api.queue("stats")
    queue_id = uuid.UUID(q["id"])
    for _ in range(4):
        await api.post("/jobs", {"queue": "stats", "handler": "noop"})
    worker = await core.register_worker(
        api.pool, hostname="h", pid=1, version="t", capacity=5, queue_ids=[queue_id],
        queue_names=["stats"],
    )  # fmt: skip
    jobs = await core.claim(api.pool, worker, [queue_id], 4, 30_000)
    await core.mark_running(api.pool, [j.fence for j in jobs])
    await core.complete(api.pool, [core.Completion(j.fence) for j in jobs[:3]])
    await core.fail(api.pool, [core.Failure(jobs[3].fence, error="boom")])

    stats = (await api.get(f"/queues/{q['id']}/stats")).json()
    assert len(stats["throughput"]) == 60
    assert sum(b["completed"] for b in stats["throughput"]) == 3
    assert sum(b["failed"] for b in stats["throughput"]) == 1
    assert stats["run"]["samples"] == 4
    assert stats["run"]["p50_ms"] is not None
    assert stats["run"]["p50_ms"] <= stats["run"]["p95_ms"]
    # Wait is measured on the job's current attempt: the failed one now waits for its retry.
    assert stats["wait"]["samples"] == 3
    assert stats["wait"]["p95_ms"] >= 0
    assert stats["depth"]["completed"] == 3


async def test_delete_refused_while_jobs_run(api: ProjectApi) -> None:
    q = await api.queue("busy")
    await api.post("/jobs", {"queue": "busy", "handler": "noop"})
    worker = await core.register_worker(
        api.pool, hostname="h", pid=1, version="t", capacity=5, queue_ids=[uuid.UUID(q["id"])],
        queue_names=["busy"],
    )  # fmt: skip
    await core.claim(api.pool, worker, [uuid.UUID(q["id"])], 1, 30_000)
    assert_error(await api.delete(f"/queues/{q['id']}"), 409, "queue_busy")
    assert (await api.get(f"/queues/{q['id']}")).status_code == 200


async def test_viewer_reads_but_cannot_change(api: ProjectApi) -> None:
    q = await api.queue("ro")
    viewer = await api.member(MemberRole.VIEWER)
    r = await api.client.get(api.url("/queues"), headers=viewer)
    assert r.status_code == 200
    assert r.json()["items"][0]["name"] == "ro"
    r = await api.client.post(api.url(f"/queues/{q['id']}/pause"), headers=viewer)
    assert_error(r, 403, "forbidden")


async def test_operator_actions_are_audited(api: ProjectApi) -> None:
    q = await api.queue("audited")
    await api.post(f"/queues/{q['id']}/pause")
    await api.post(f"/queues/{q['id']}/resume")
    await api.delete(f"/queues/{q['id']}")
    rows = await api.pool.fetch(
        """SELECT action, target_id, actor_user_id FROM audit_events
           WHERE project_id = $1 ORDER BY id""",
        api.project_id,
    )
    assert [r["action"] for r in rows] == [
        "queue.create", "queue.pause", "queue.resume", "queue.delete"
    ]  # fmt: skip
    assert {r["target_id"] for r in rows} == {q["id"]}
    assert all(r["actor_user_id"] is not None for r in rows)


async def test_a_queue_cannot_use_another_projects_retry_policy(api: ProjectApi) -> None:
    other_project, other_headers = await api.outsider()
    theirs = await api.client.post(
        f"/api/v1/projects/{other_project}/retry-policies",
        json={"name": "x"},
        headers=other_headers,
    )
    policy_id = theirs.json()["id"]
    r = await api.post("/queues", {"name": "borrow", "retry_policy_id": policy_id})
    assert_error(r, 404, "retry_policy_not_found")
    q = await api.queue("own")
    r = await api.patch(f"/queues/{q['id']}", {"retry_policy_id": policy_id})
    assert_error(r, 404, "retry_policy_not_found")
    assert (await api.get(f"/queues/{q['id']}")).json()["retry_policy"] is None


async def test_a_change_and_its_audit_row_commit_together(api: ProjectApi) -> None:
    """A client address the audit column cannot store (Starlette's test client calls itself
    "testclient") must not leave the queue paused with no audit row: all or nothing."""
    import httpx

    q = await api.queue("atomic")
    app = api.client._transport.app  # type: ignore[attr-defined]
    transport = httpx.ASGITransport(app=app, client=("testclient", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as odd:
        r = await odd.post(api.url(f"/queues/{q['id']}/pause"), headers=api.headers)
    paused = await api.pool.fetchval(
        "SELECT is_paused FROM queues WHERE id = $1", uuid.UUID(q["id"])
    )
    audited = await api.pool.fetchval(
        "SELECT count(*) FROM audit_events WHERE action = 'queue.pause' AND target_id = $1", q["id"]
    )
    assert (r.status_code == 200) == paused == (audited == 1), (r.status_code, paused, audited)


async def test_retry_policy_crud(api: ProjectApi) -> None:
    created = await api.post(
        "/retry-policies",
        {"name": "slow", "strategy": "linear", "base_delay_ms": 500, "max_delay_ms": 5000},
    )
    assert created.status_code == 201, created.text
    policy = created.json()
    await api.queue("uses-slow", retry_policy_id=policy["id"])
    read = (await api.get(f"/retry-policies/{policy['id']}")).json()
    assert read["strategy"] == "linear"
    assert read["queue_count"] == 1
    patched = await api.patch(f"/retry-policies/{policy['id']}", {"max_attempts": 7})
    assert patched.json()["max_attempts"] == 7
    assert patched.json()["base_delay_ms"] == 500
    assert_error(await api.post("/retry-policies", {"name": "slow"}), 409, "name_taken")
    assert (await api.delete(f"/retry-policies/{policy['id']}")).status_code == 204
    # The queue falls back to its own defaults (SET NULL), it is not deleted.
    assert (await api.get("/queues")).json()["items"][0]["retry_policy"] is None
    assert_error(await api.get(f"/retry-policies/{policy['id']}"), 404, "retry_policy_not_found")
