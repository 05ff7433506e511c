"""Dead letters: list with reasons, replay one / many / a queue, discard one / many."""

from __future__ import annotations

import uuid

from tests.api.project_api import ProjectApi, assert_error, resource_fixtures
from tests.factories import make_dead_letter, make_queue

from codity import core

shared_app_fixture, api_fixture = resource_fixtures()


async def _dead_letter(api: ProjectApi, queue: str, n: int, error: str = "boom") -> list[int]:
    """Enqueue n jobs with one attempt each and fail them: they land in the dead-letter queue."""
    info = await core.resolve_queue(api.pool, api.project_id, queue)
    ids = []
    for _ in range(n):
        r = await api.post(
            "/jobs", {"queue": queue, "handler": "h", "max_attempts": 1, "payload": {"k": 1}}
        )
        ids.append(r.json()["id"])
    worker = await core.register_worker(
        api.pool,
        hostname="h",
        pid=1,
        version="t",
        capacity=n,
        queue_ids=[info.id],
        queue_names=[queue],
    )
    claimed = await core.claim(api.pool, worker, [info.id], n, 30_000)
    await core.fail(api.pool, [core.Failure(c.fence, error=error) for c in claimed])
    return ids


async def test_list_filters_and_reasons(api: ProjectApi) -> None:
    await api.queue("a")
    await api.queue("b")
    await _dead_letter(api, "a", 3, "timeout talking to smtp")
    await _dead_letter(api, "b", 1, "bad address")
    page = (await api.get("/dead-letters")).json()
    assert page["total"] == 4
    assert len(page["items"]) == 4
    assert page["reasons"][0] == {"error": "timeout talking to smtp", "count": 3}
    only_b = (await api.get("/dead-letters", params={"queue": "b"})).json()
    assert [d["queue_name"] for d in only_b["items"]] == ["b"]
    assert only_b["items"][0]["payload"] == {"k": 1}
    assert only_b["items"][0]["error"] == "bad address"
    first = (await api.get("/dead-letters", params={"limit": 3})).json()
    rest = (
        await api.get("/dead-letters", params={"limit": 3, "cursor": first["next_cursor"]})
    ).json()
    assert len({d["id"] for d in first["items"] + rest["items"]}) == 4
    assert rest["next_cursor"] is None


async def test_replay_one_and_discard_one(api: ProjectApi) -> None:
    await api.queue("a")
    job_ids = await _dead_letter(api, "a", 2)
    items = (await api.get("/dead-letters")).json()["items"]
    by_job = {d["job_id"]: d["id"] for d in items}
    r = await api.post(f"/dead-letters/{by_job[job_ids[0]]}/replay")
    assert r.status_code == 200, r.text
    assert r.json() == {"replayed": 1, "job_ids": [job_ids[0]]}
    assert (await api.get(f"/jobs/{job_ids[0]}")).json()["status"] == "queued"
    assert (await api.delete(f"/dead-letters/{by_job[job_ids[1]]}")).status_code == 204
    page = (await api.get("/dead-letters")).json()
    assert page["total"] == 0
    replayed = (await api.get("/dead-letters", params={"include_replayed": True})).json()["items"]
    assert [d["replay_count"] for d in replayed] == [1]


async def test_replay_many_and_a_whole_queue(api: ProjectApi) -> None:
    await api.queue("a")
    await api.queue("b")
    a_jobs = await _dead_letter(api, "a", 3)
    b_jobs = await _dead_letter(api, "b", 2)
    ids_b = [
        d["id"] for d in (await api.get("/dead-letters", params={"queue": "b"})).json()["items"]
    ]
    r = await api.post("/dead-letters/replay", {"ids": ids_b})
    assert sorted(r.json()["job_ids"]) == sorted(b_jobs)
    r = await api.post("/dead-letters/replay", {"queue": "a"})
    assert sorted(r.json()["job_ids"]) == sorted(a_jobs)
    assert (await api.get("/dead-letters")).json()["total"] == 0
    assert_error(
        await api.post("/dead-letters/replay", {"ids": ids_b, "queue": "a"}),
        422,
        "validation_error",
    )
    assert_error(await api.post("/dead-letters/replay", {}), 422, "validation_error")


async def test_discard_many(api: ProjectApi) -> None:
    await api.queue("a")
    await _dead_letter(api, "a", 3)
    ids = [d["id"] for d in (await api.get("/dead-letters")).json()["items"]]
    r = await api.post("/dead-letters/discard", {"ids": ids[:2]})
    assert r.json() == {"discarded": 2}
    assert (await api.get("/dead-letters")).json()["total"] == 1


async def test_foreign_or_unknown_ids_touch_nothing(api: ProjectApi) -> None:
    await api.queue("a")
    await _dead_letter(api, "a", 1)
    mine = (await api.get("/dead-letters")).json()["items"][0]["id"]
    other_project, _ = await api.outsider()
    other_queue = await make_queue(api.pool, other_project, name="theirs")
    theirs = await make_dead_letter(api.pool, other_queue, handler="h", error="x", attempts=1)
    assert_error(await api.post(f"/dead-letters/{theirs}/replay"), 404, "dead_letter_not_found")
    assert_error(await api.delete(f"/dead-letters/{theirs}"), 404, "dead_letter_not_found")
    # A mixed list is refused whole: mine is not replayed either.
    assert_error(
        await api.post("/dead-letters/replay", {"ids": [mine, str(theirs)]}),
        404,
        "dead_letter_not_found",
    )
    assert_error(
        await api.post("/dead-letters/discard", {"ids": [mine, str(uuid.uuid4())]}),
        404,
        "dead_letter_not_found",
    )
    assert (await api.get("/dead-letters")).json()["total"] == 1
    assert (
        await api.pool.fetchval("SELECT count(*) FROM dead_letter_jobs WHERE id = $1", theirs) == 1
    )
