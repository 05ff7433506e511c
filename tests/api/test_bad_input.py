"""Bad input answers the error envelope with a specific code, never a 500, and writes nothing."""

from __future__ import annotations

import uuid

import pytest
from tests.api.project_api import ProjectApi, assert_error, resource_fixtures

shared_app_fixture, api_fixture = resource_fixtures()


async def _jobs_stored(api: ProjectApi) -> int:
    n: int = await api.pool.fetchval(
        "SELECT count(*) FROM jobs j JOIN queues q ON q.id = j.queue_id WHERE q.project_id = $1",
        api.project_id,
    )
    return n


async def test_malformed_json(api: ProjectApi) -> None:
    await api.queue("in")
    r = await api.client.post(
        api.url("/jobs"),
        content=b'{"queue": "in", "handler": ',
        headers={**api.headers, "Content-Type": "application/json"},
    )
    error = assert_error(r, 422, "validation_error")
    assert "not valid JSON" in error["message"]
    assert await _jobs_stored(api) == 0


async def test_wrong_types_name_the_field(api: ProjectApi) -> None:
    await api.queue("in")
    r = await api.post(
        "/jobs", {"queue": "in", "handler": "h", "priority": "high", "depends_on": "7"}
    )
    error = assert_error(r, 422, "validation_error")
    locs = {tuple(d["loc"]) for d in error["details"]}
    assert ("body", "priority") in locs
    assert ("body", "depends_on") in locs
    assert all("input" not in d for d in error["details"])  # the offending value is not echoed


async def test_unknown_fields_are_refused(api: ProjectApi) -> None:
    await api.queue("in")
    r = await api.post("/jobs", {"queue": "in", "handler": "h", "prio": 5})
    error = assert_error(r, 422, "validation_error")
    assert error["details"][0]["loc"] == ["body", "prio"]
    assert error["details"][0]["type"] == "extra_forbidden"
    assert_error(await api.post("/queues", {"name": "x", "paused": True}), 422, "validation_error")


async def test_payload_over_64_kb(api: ProjectApi) -> None:
    await api.queue("in")
    big = {"blob": "x" * 70_000}
    error = assert_error(
        await api.post("/jobs", {"queue": "in", "handler": "h", "payload": big}),
        413,
        "payload_too_large",
    )
    assert "64" in error["message"] or "65536" in error["message"]
    r = await api.post(
        "/jobs/bulk", {"queue": "in", "jobs": [{"handler": "h"}, {"handler": "h", "payload": big}]}
    )
    assert_error(r, 413, "payload_too_large")
    assert await _jobs_stored(api) == 0


async def test_body_over_the_request_limit(api: ProjectApi) -> None:
    await api.queue("in")
    huge = b'{"queue": "in", "handler": "h", "payload": "' + b"x" * 2_000_000 + b'"}'
    r = await api.client.post(
        api.url("/jobs"), content=huge, headers={**api.headers, "Content-Type": "application/json"}
    )
    assert_error(r, 413, "payload_too_large")


async def test_text_postgres_cannot_store_is_refused(api: ProjectApi) -> None:
    """NUL bytes (in a field or inside the JSON payload) would fail in the database: 422 instead."""
    await api.queue("in")
    assert_error(
        await api.post("/jobs", {"queue": "in", "handler": "a\u0000b"}), 422, "validation_error"
    )
    r = await api.post("/jobs", {"queue": "in", "handler": "h", "payload": {"k\u0000": "v"}})
    assert_error(r, 422, "validation_error")
    r = await api.post(
        "/jobs", {"queue": "in", "handler": "h", "payload": ["ok", {"deep": "x\u0000"}]}
    )
    assert_error(r, 422, "validation_error")
    assert await _jobs_stored(api) == 0


async def test_invalid_cron(api: ProjectApi) -> None:
    await api.queue("in")
    body = {"queue": "in", "name": "s", "cron_expression": "* * 31 2 *", "handler": "h"}
    assert_error(await api.post("/schedules", body), 422, "invalid_cron")
    assert_error(
        await api.post("/schedules/validate", {"cron_expression": "*/0 * * * *"}),
        422,
        "invalid_cron",
    )


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [
        ("GET", "/queues/{uuid}", "queue_not_found"),
        ("POST", "/queues/{uuid}/pause", "queue_not_found"),
        ("GET", "/queues/{uuid}/stats", "queue_not_found"),
        ("GET", "/jobs/987654321", "job_not_found"),
        ("POST", "/jobs/987654321/retry", "job_not_found"),
        ("GET", "/schedules/{uuid}", "schedule_not_found"),
        ("POST", "/dead-letters/{uuid}/replay", "dead_letter_not_found"),
        ("PATCH", "/retry-policies/{uuid}", "retry_policy_not_found"),
        ("GET", "/jobs?queue=nope", "queue_not_found"),
    ],
)
async def test_unknown_ids(api: ProjectApi, method: str, path: str, code: str) -> None:
    r = await api.client.request(
        method,
        api.url(path.format(uuid=uuid.uuid4())),
        headers=api.headers,
        json={} if method == "PATCH" else None,
    )
    assert_error(r, 404, code)


async def test_malformed_ids_and_cursors(api: ProjectApi) -> None:
    assert_error(await api.get("/queues/not-a-uuid"), 422, "validation_error")
    assert_error(await api.get(f"/jobs/{2**63}"), 422, "validation_error")  # past bigint
    assert_error(await api.get("/jobs/0"), 422, "validation_error")
    assert_error(await api.get("/jobs", params={"cursor": "bm90IGEgbGlzdA"}), 422, "invalid_cursor")
    assert_error(await api.get("/jobs", params={"limit": 201}), 422, "validation_error")
    assert_error(await api.get("/jobs", params={"status": "sleeping"}), 422, "validation_error")
    naive = {"created_after": "2026-01-01T00:00:00"}  # which timezone? refused, not guessed
    assert_error(await api.get("/jobs", params=naive), 422, "validation_error")


async def test_inconsistent_settings(api: ProjectApi) -> None:
    body = {"name": "p", "base_delay_ms": 5000, "max_delay_ms": 1000}
    assert_error(await api.post("/retry-policies", body), 422, "validation_error")
    policy = (await api.post("/retry-policies", {"name": "p"})).json()
    r = await api.patch(f"/retry-policies/{policy['id']}", {"base_delay_ms": 10_000_000})
    assert_error(r, 422, "validation_error")
    header_and_body = {**api.headers, "Idempotency-Key": "a"}
    await api.queue("in")
    r = await api.client.post(
        api.url("/jobs"),
        json={"queue": "in", "handler": "h", "idempotency_key": "b"},
        headers=header_and_body,
    )
    assert_error(r, 422, "validation_error")
    assert_error(await api.post("/queues", {"name": "Bad Name!"}), 422, "validation_error")
