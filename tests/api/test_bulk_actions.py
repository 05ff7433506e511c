"""Bulk actions: every job (or dead letter) a filter matches, acted on in bounded chunks, with
one audit row, safe to repeat and to resume, inside the project only."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.api.project_api import (
    LiveApp,
    ProjectApi,
    assert_error,
    live_app,
    module_database,
)
from tests.factories import (
    make_bulk_action,
    make_dead_letter,
    make_job,
    make_jobs,
    make_queue,
    make_worker,
)
from tests.waiting import wait_for

from codity.api.bulk_runner import run_chunk
from codity.db.pool import connect
from codity.domain.states import MemberRole

CHUNK = 2000
MANY = 50_000


@pytest.fixture(scope="module")
async def bulk_db(pg_server_url: str, template_database: str) -> AsyncIterator[str]:
    async with module_database(pg_server_url, template_database) as url:
        yield url


@pytest.fixture(scope="module")
async def shared_app(bulk_db: str) -> AsyncIterator[LiveApp]:
    async with live_app(
        bulk_db,
        BULK_ACTION_CHUNK=CHUNK,
        BULK_ACTION_PAUSE_MS=0,
        RATE_LIMIT_ENQUEUE_PER_MINUTE=1_000_000,
        RATE_LIMIT_ENQUEUE_PER_MINUTE_ORG=1_000_000,
    ) as live:
        yield live


@pytest.fixture
async def api(shared_app: LiveApp) -> ProjectApi:
    return await shared_app.new_tenant()


async def _queue_id(api: ProjectApi, name: str) -> uuid.UUID:
    return uuid.UUID((await api.queue(name))["id"])


async def _finished(api: ProjectApi, bulk_id: str, timeout_s: float = 60) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        body: dict[str, Any] = (await api.get(f"/bulk-actions/{bulk_id}")).json()
        return body if body["status"] in ("completed", "stopped", "failed") else None

    result: dict[str, Any] = await wait_for(done, timeout_s=timeout_s, what="bulk action end")
    return result


async def _statuses(api: ProjectApi, queue_id: uuid.UUID) -> dict[str, int]:
    rows = await api.pool.fetch(
        "SELECT status::text, count(*) FROM jobs WHERE queue_id = $1 GROUP BY 1", queue_id
    )
    return {r["status"]: r["count"] for r in rows}


async def test_cancel_50000_matching_jobs_in_chunks_with_one_audit_row(api: ProjectApi) -> None:
    queue_id = await _queue_id(api, "mail")
    await make_jobs(api.pool, queue_id, MANY, payload={"customer_id": 42})
    await make_jobs(api.pool, queue_id, 300, payload={"customer_id": 7})  # not matched
    other_id, _ = await api.outsider()
    other_queue = await make_queue(api.pool, other_id, name="mail")
    await make_jobs(api.pool, other_queue, 500, payload={"customer_id": 42})

    # No queue in the filter: only the project scope keeps the other tenant's jobs out.
    job_filter = {"status": ["queued"], "payload": "customer_id = 42"}
    count = await api.get("/jobs/count", params=job_filter)
    assert count.json() == {"count": MANY}
    r = await api.post("/jobs/bulk-actions", {"action": "cancel", "filter": job_filter})
    assert r.status_code == 202, r.text
    created = r.json()
    assert created["matched"] == MANY
    assert created["status"] in ("pending", "running")

    final = await _finished(api, created["id"])
    assert final["status"] == "completed"
    assert (final["processed"], final["skipped"]) == (MANY, 0)
    assert final["chunks"] == MANY // CHUNK
    assert await _statuses(api, queue_id) == {"cancelled": MANY, "queued": 300}
    # Another tenant's jobs matching the same filter are never touched.
    assert await _statuses(api, other_queue) == {"queued": 500}
    # now() is the transaction's start: jobs cancelled by one transaction share finished_at.
    per_tx = await api.pool.fetch(
        "SELECT finished_at, count(*) AS n FROM jobs WHERE queue_id = $1 AND status = 'cancelled'"
        " GROUP BY finished_at",
        queue_id,
    )
    assert max(r["n"] for r in per_tx) <= CHUNK
    assert len(per_tx) == MANY // CHUNK
    audit = await api.pool.fetch(
        "SELECT action, details FROM audit_events WHERE target_type = 'bulk_action'"
        " AND target_id = $1",
        created["id"],
    )
    assert len(audit) == 1
    assert audit[0]["action"] == "job.bulk_cancel"
    # The filter, with the payload search's value left out (audit rows hold no payload values).
    assert audit[0]["details"]["filter"] == {"status": ["queued"], "payload": "customer_id = …"}
    assert audit[0]["details"]["processed"] == MANY
    assert audit[0]["details"]["status"] == "completed"

    # Repeating it changes nothing: the same filter now matches no queued job; by queue only,
    # every job is matched and skipped (already cancelled or, for the 300, cancelled now).
    again = await api.post("/jobs/bulk-actions", {"action": "cancel", "filter": {"queue": "mail"}})
    final = await _finished(api, again.json()["id"])
    assert (final["matched"], final["processed"], final["skipped"]) == (MANY + 300, 300, MANY)
    assert await _statuses(api, queue_id) == {"cancelled": MANY + 300}


async def test_retry_and_delete_follow_the_single_job_rules(api: ProjectApi) -> None:
    queue_id = await _queue_id(api, "q")
    dead = await make_jobs(api.pool, queue_id, 40, status="dead_letter", last_error="smtp timeout")
    await make_jobs(api.pool, queue_id, 30, status="completed")
    await make_jobs(api.pool, queue_id, 20, status="queued")
    for job_id in dead[:5]:
        await make_dead_letter(api.pool, queue_id, job_id=job_id)
    r = await api.post("/jobs/bulk-actions", {"action": "retry", "filter": {"queue": "q"}})
    final = await _finished(api, r.json()["id"])
    # Only failed/dead-lettered/cancelled jobs re-run; completed and queued ones are skipped.
    assert (final["matched"], final["processed"], final["skipped"]) == (90, 40, 50)
    assert await _statuses(api, queue_id) == {"queued": 60, "completed": 30}
    pending = await api.pool.fetchval(
        "SELECT count(*) FROM dead_letter_jobs WHERE queue_id = $1 AND replayed_at IS NULL",
        queue_id,
    )
    assert pending == 0  # their dead letters are marked replayed, as a single retry does
    r = await api.post("/jobs/bulk-actions", {"action": "delete", "filter": {"queue": "q"}})
    final = await _finished(api, r.json()["id"])
    assert (final["processed"], final["skipped"]) == (30, 60)  # only finished jobs go
    assert await _statuses(api, queue_id) == {"queued": 60}


async def test_cancel_of_a_running_job_is_a_request(api: ProjectApi) -> None:
    queue_id = await _queue_id(api, "q")
    worker = await make_worker(api.pool)
    running = [
        await make_job(api.pool, queue_id, status="running", worker_id=worker, leased=True)
        for _ in range(3)
    ]
    r = await api.post("/jobs/bulk-actions", {"action": "cancel", "ids": running})
    final = await _finished(api, r.json()["id"])
    assert final["processed"] == 3
    rows = await api.pool.fetch(
        "SELECT status::text, cancel_requested_at FROM jobs WHERE id = ANY($1)", running
    )
    assert all(r["status"] == "running" and r["cancel_requested_at"] for r in rows)


async def test_a_job_locked_by_a_worker_is_skipped_not_waited_for(api: ProjectApi) -> None:
    queue_id = await _queue_id(api, "q")
    ids = await make_jobs(api.pool, queue_id, 300)
    async with api.pool.acquire() as holder, holder.transaction():
        await holder.execute("SELECT id FROM jobs WHERE id = $1 FOR UPDATE", ids[10])
        r = await api.post("/jobs/bulk-actions", {"action": "cancel", "filter": {"queue": "q"}})
        final = await _finished(api, r.json()["id"], timeout_s=15)
    assert (final["processed"], final["skipped"]) == (299, 1)
    assert await _statuses(api, queue_id) == {"cancelled": 299, "queued": 1}


async def test_ids_of_another_project_are_refused_and_untouched(api: ProjectApi) -> None:
    queue_id = await _queue_id(api, "q")
    mine = await make_jobs(api.pool, queue_id, 3)
    other_id, other_headers = await api.outsider()
    other_queue = await make_queue(api.pool, other_id, name="q")
    theirs = await make_jobs(api.pool, other_queue, 3)
    r = await api.post("/jobs/bulk-actions", {"action": "cancel", "ids": mine + theirs})
    assert_error(r, 404, "job_not_found")
    r = await api.post("/jobs/bulk-actions", {"action": "cancel", "ids": theirs})
    assert_error(r, 404, "job_not_found")
    assert await _statuses(api, other_queue) == {"queued": 3}
    assert (await api.get("/bulk-actions")).json()["items"] == []
    # Another organisation's owner cannot read or stop this project's actions.
    r = await api.post("/jobs/bulk-actions", {"action": "cancel", "ids": mine})
    one = f"/api/v1/projects/{api.project_id}/bulk-actions/{r.json()['id']}"
    assert (await api.client.get(one, headers=other_headers)).status_code == 404
    assert (await api.client.post(one + "/stop", headers=other_headers)).status_code == 404
    elsewhere = f"/api/v1/projects/{other_id}/bulk-actions/{r.json()['id']}"
    assert_error(
        await api.client.get(elsewhere, headers=other_headers), 404, "bulk_action_not_found"
    )


async def test_a_viewer_reads_but_cannot_act(api: ProjectApi) -> None:
    queue_id = await _queue_id(api, "q")
    ids = await make_jobs(api.pool, queue_id, 2)
    viewer = await api.member(MemberRole.VIEWER)
    r = await api.client.post(
        api.url("/jobs/bulk-actions"), json={"action": "cancel", "ids": ids}, headers=viewer
    )
    assert_error(r, 403, "forbidden")
    r = await api.client.post(
        api.url("/dead-letters/bulk-actions"),
        json={"action": "discard", "filter": {}},
        headers=viewer,
    )
    assert_error(r, 403, "forbidden")
    created = (await api.post("/jobs/bulk-actions", {"action": "cancel", "ids": ids})).json()
    stop = await api.client.post(api.url(f"/bulk-actions/{created['id']}/stop"), headers=viewer)
    assert_error(stop, 403, "forbidden")
    assert (await api.client.get(api.url("/bulk-actions"), headers=viewer)).status_code == 200
    counted = await api.client.get(api.url("/jobs/count"), headers=viewer)
    assert counted.json() == {"count": 2}
    # The action runs in the background: wait for its end, which the viewer's stop did not cut.
    assert (await _finished(api, created["id"]))["status"] == "completed"
    assert await _statuses(api, queue_id) == {"cancelled": 2}


async def test_bad_bodies_answer_the_envelope(api: ProjectApi) -> None:
    for body in (
        {"action": "cancel"},
        {"action": "cancel", "filter": {}, "ids": [1]},
        {"action": "explode", "filter": {}},
        {"action": "replay", "filter": {}},
        {"action": "cancel", "filter": {"color": "red"}},
    ):
        assert_error(await api.post("/jobs/bulk-actions", body), 422, "validation_error")
    r = await api.post("/jobs/bulk-actions", {"action": "cancel", "filter": {"payload": "= ="}})
    assert_error(r, 422, "validation_error")
    r = await api.post("/jobs/bulk-actions", {"action": "cancel", "filter": {"queue": "nope"}})
    assert_error(r, 404, "queue_not_found")
    assert_error(await api.get(f"/bulk-actions/{uuid.uuid4()}"), 404, "bulk_action_not_found")


async def test_dead_letters_replay_by_filter_and_discard_by_ids(api: ProjectApi) -> None:
    a = await _queue_id(api, "a")
    b = await _queue_id(api, "b")
    jobs = await make_jobs(api.pool, a, 30, status="dead_letter")
    for job_id in jobs:
        await make_dead_letter(api.pool, a, job_id=job_id)
    in_b = [await make_dead_letter(api.pool, b) for _ in range(4)]
    r = await api.post("/dead-letters/bulk-actions", {"action": "replay", "filter": {"queue": "a"}})
    assert r.status_code == 202, r.text
    final = await _finished(api, r.json()["id"])
    assert (final["matched"], final["processed"], final["skipped"]) == (30, 30, 0)
    assert await _statuses(api, a) == {"queued": 30}
    # Repeating the replay finds nothing left to replay.
    r = await api.post("/dead-letters/bulk-actions", {"action": "replay", "filter": {"queue": "a"}})
    assert (await _finished(api, r.json()["id"]))["matched"] == 0
    r = await api.post(
        "/dead-letters/bulk-actions", {"action": "discard", "ids": [str(i) for i in in_b[:2]]}
    )
    final = await _finished(api, r.json()["id"])
    assert final["processed"] == 2
    left = await api.pool.fetchval("SELECT count(*) FROM dead_letter_jobs WHERE queue_id = $1", b)
    assert left == 2
    r = await api.post(
        "/dead-letters/bulk-actions", {"action": "discard", "ids": [str(uuid.uuid4())]}
    )
    assert_error(r, 404, "dead_letter_not_found")


async def test_the_list_is_paginated(api: ProjectApi) -> None:
    queue_id = await _queue_id(api, "q")
    ids = await make_jobs(api.pool, queue_id, 3)
    made = [
        (await api.post("/jobs/bulk-actions", {"action": "cancel", "ids": [i]})).json()["id"]
        for i in ids
    ]
    first = (await api.get("/bulk-actions", params={"limit": 2})).json()
    rest = (
        await api.get("/bulk-actions", params={"limit": 2, "cursor": first["next_cursor"]})
    ).json()
    assert [b["id"] for b in first["items"] + rest["items"]] == made[::-1]
    assert rest["next_cursor"] is None


async def test_a_process_that_lost_its_action_runs_no_chunk_of_it(api: ProjectApi) -> None:
    """Each chunk re-checks, under the action's row lock, that this process still holds it: a
    process that was taken over (it stalled past BULK_ACTION_STALE_MS) changes nothing."""
    queue_id = await _queue_id(api, "q")
    ids = await make_jobs(api.pool, queue_id, 50)
    bulk_id = await make_bulk_action(
        api.pool, api.project_id, job_ids=ids, status="running", owner="taken-over-by-me"
    )
    assert await run_chunk(api.pool, bulk_id, "the-stalled-one", 100) is False
    assert await _statuses(api, queue_id) == {"queued": 50}
    assert await run_chunk(api.pool, bulk_id, "taken-over-by-me", 100) is False  # done: 50 < 100
    assert await _statuses(api, queue_id) == {"cancelled": 50}
    final = (await api.get(f"/bulk-actions/{bulk_id}")).json()
    assert (final["status"], final["processed"], final["chunks"]) == ("completed", 50, 1)


# --- stop and resume: apps of their own (pauses and takeover times of their own) ----------------


async def test_stop_ends_the_action_after_the_chunk_in_flight(database_url: str) -> None:
    async with live_app(database_url, BULK_ACTION_CHUNK=100, BULK_ACTION_PAUSE_MS=100) as live:
        api = await live.new_tenant()
        queue_id = await _queue_id(api, "q")
        await make_jobs(api.pool, queue_id, 3000)
        r = await api.post("/jobs/bulk-actions", {"action": "cancel", "filter": {"queue": "q"}})
        bulk_id = r.json()["id"]

        async def some_done() -> bool:
            return bool((await api.get(f"/bulk-actions/{bulk_id}")).json()["chunks"])

        await wait_for(some_done, what="a first chunk")
        stopped = (await api.post(f"/bulk-actions/{bulk_id}/stop")).json()
        assert stopped["status"] == "stopped"
        assert stopped["processed"] < 3000
        # After the stop no chunk runs: give the runner many pauses' worth of chances.
        await live.pool.execute("SELECT pg_sleep(1)")
        after = (await api.get(f"/bulk-actions/{bulk_id}")).json()
        assert after["processed"] == stopped["processed"]
        assert (await _statuses(api, queue_id))["cancelled"] == stopped["processed"]
        audit = await api.pool.fetch(
            "SELECT details FROM audit_events WHERE target_id = $1", bulk_id
        )
        assert [a["details"]["status"] for a in audit] == ["stopped"]
        again = await api.post(f"/bulk-actions/{bulk_id}/stop")  # a second stop changes nothing
        assert again.json()["status"] == "stopped"


async def test_an_action_left_by_a_dead_process_is_resumed_from_its_position(
    database_url: str,
) -> None:
    # Process A runs one chunk, then "dies" (it stops with the action still running, its row
    # claimed by A: what a SIGKILLed API leaves behind).
    async with live_app(database_url, BULK_ACTION_CHUNK=100, BULK_ACTION_PAUSE_MS=60_000) as a:
        api = await a.new_tenant()
        queue_id = await _queue_id(api, "q")
        await make_jobs(api.pool, queue_id, 1000)
        r = await api.post("/jobs/bulk-actions", {"action": "cancel", "filter": {"queue": "q"}})
        bulk_id = r.json()["id"]

        async def one_chunk() -> bool:
            return bool((await api.get(f"/bulk-actions/{bulk_id}")).json()["chunks"])

        await wait_for(one_chunk, what="the first chunk")
    # No process runs the action now: its row is as A left it. Jobs enqueued after the action
    # was created are not part of it; they are made before B starts, which may resume the
    # action at once (its row is stale 300 ms after A's last beat).
    conn = await connect(database_url)
    try:
        row = await conn.fetchrow("SELECT status, chunks FROM bulk_actions WHERE id = $1", bulk_id)
        later = await make_jobs(conn, queue_id, 50)
    finally:
        await conn.close()
    assert (row["status"], row["chunks"]) == ("running", 1)
    async with live_app(database_url, BULK_ACTION_PAUSE_MS=0, BULK_ACTION_STALE_MS=300) as b:
        api.client, api.pool = b.client, b.pool
        final = await _finished(api, bulk_id)
        assert final["status"] == "completed"
        # Resumed after the first chunk: nothing walked twice (skipped would count it), no
        # job left out, the later jobs untouched.
        assert (final["matched"], final["processed"], final["skipped"]) == (1000, 1000, 0)
        assert await _statuses(api, queue_id) == {"cancelled": 1000, "queued": len(later)}


async def test_dead_letters_are_walked_in_chunks_from_their_position(database_url: str) -> None:
    async with live_app(database_url, BULK_ACTION_CHUNK=10, BULK_ACTION_PAUSE_MS=0) as live:
        api = await live.new_tenant()
        queue_id = await _queue_id(api, "q")
        for _ in range(25):
            await make_dead_letter(api.pool, queue_id)
        other_id, _ = await api.outsider()
        other_queue = await make_queue(api.pool, other_id, name="q")
        await make_dead_letter(api.pool, other_queue)
        r = await api.post("/dead-letters/bulk-actions", {"action": "discard", "filter": {}})
        final = await _finished(api, r.json()["id"])
        assert (final["matched"], final["processed"], final["skipped"], final["chunks"]) == (
            25,
            25,
            0,
            3,
        )
        count = "SELECT count(*) FROM dead_letter_jobs WHERE queue_id = $1"
        assert await api.pool.fetchval(count, queue_id) == 0
        assert await api.pool.fetchval(count, other_queue) == 1
