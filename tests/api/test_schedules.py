"""Cron schedules: CRUD with validation, enable/disable, trigger now, next fire times."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from tests.api.project_api import ProjectApi, assert_error, resource_fixtures

from codity.domain.cron import next_fire_times

shared_app_fixture, api_fixture = resource_fixtures()


async def _schedule(api: ProjectApi, **fields: object) -> dict[str, object]:
    body = {
        "queue": "cron",
        "name": "nightly",
        "cron_expression": "0 3 * * *",
        "handler": "report",
        **fields,
    }
    r = await api.post("/schedules", body)
    assert r.status_code == 201, r.text
    result: dict[str, object] = r.json()
    return result


async def test_create_computes_next_run_in_the_timezone(api: ProjectApi) -> None:
    await api.queue("cron")
    s = await _schedule(api, timezone="Europe/Paris", payload={"kind": "daily"})
    expected = next_fire_times("0 3 * * *", "Europe/Paris", datetime.now(UTC), 1)[0]
    assert datetime.fromisoformat(str(s["next_run_at"])) == expected
    assert s["queue_name"] == "cron"
    assert s["enabled"] is True
    assert s["payload"] == {"kind": "daily"}
    listed = (await api.get("/schedules")).json()
    assert [x["id"] for x in listed["items"]] == [s["id"]]


async def test_invalid_cron_and_timezone_are_refused_with_a_message(api: ProjectApi) -> None:
    await api.queue("cron")
    error = assert_error(
        await api.post(
            "/schedules",
            {"queue": "cron", "name": "x", "cron_expression": "61 * * * *", "handler": "h"},
        ),
        422,
        "invalid_cron",
    )
    assert "61 * * * *" in error["message"]
    error = assert_error(
        await api.post(
            "/schedules",
            {
                "queue": "cron",
                "name": "x",
                "cron_expression": "* * * * *",
                "timezone": "Mars/Olympus",
                "handler": "h",
            },
        ),
        422,
        "invalid_cron",
    )
    assert "timezone" in error["message"]
    assert (await api.get("/schedules")).json()["items"] == []


async def test_validate_endpoint_previews_fire_times(api: ProjectApi) -> None:
    # Six fields: the first is seconds (CRON_MIN_INTERVAL_S keeps fires a minute apart here).
    r = await api.post("/schedules/validate", {"cron_expression": "30 */15 * * * *", "n": 3})
    assert r.status_code == 200, r.text
    preview = r.json()
    assert preview["has_seconds"] is True
    times = [datetime.fromisoformat(t) for t in preview["next_fire_times"]]
    assert len(times) == 3
    assert times[1] - times[0] == timedelta(minutes=15)
    assert {t.second for t in times} == {30}
    error = assert_error(
        await api.post("/schedules/validate", {"cron_expression": "every day"}), 422, "invalid_cron"
    )
    assert "fields" in error["message"]


async def test_update_disable_enable_and_next(api: ProjectApi) -> None:
    await api.queue("cron")
    s = await _schedule(api)
    r = await api.patch(f"/schedules/{s['id']}", {"cron_expression": "*/5 * * * *", "priority": 9})
    assert r.status_code == 200, r.text
    assert r.json()["priority"] == 9
    after = datetime.fromisoformat(r.json()["next_run_at"])
    assert after <= datetime.now(UTC) + timedelta(minutes=5)
    assert_error(
        await api.patch(f"/schedules/{s['id']}", {"cron_expression": "bad"}), 422, "invalid_cron"
    )

    assert (await api.post(f"/schedules/{s['id']}/disable")).json()["enabled"] is False
    # Pretend it was off for a long time: enabling computes the next run from now, no backlog.
    await api.pool.execute(
        "UPDATE scheduled_jobs SET next_run_at = now() - interval '7 days' WHERE id = $1", s["id"]
    )
    enabled = (await api.post(f"/schedules/{s['id']}/enable")).json()
    assert enabled["enabled"] is True
    assert datetime.fromisoformat(enabled["next_run_at"]) > datetime.now(UTC)

    nxt = (await api.get(f"/schedules/{s['id']}/next", params={"n": 4})).json()
    times = [datetime.fromisoformat(t) for t in nxt["next_fire_times"]]
    assert [b - a for a, b in itertools.pairwise(times)] == [timedelta(minutes=5)] * 3


async def test_trigger_enqueues_through_core_idempotently(api: ProjectApi) -> None:
    await api.queue("cron")
    s = await _schedule(api, payload={"x": 1}, priority=4)
    headers = {**api.headers, "Idempotency-Key": "click-1"}
    first = await api.client.post(api.url(f"/schedules/{s['id']}/trigger"), headers=headers)
    again = await api.client.post(api.url(f"/schedules/{s['id']}/trigger"), headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["job_id"] == again.json()["job_id"]
    job = (await api.get(f"/jobs/{first.json()['job_id']}")).json()
    assert job["handler"] == "report"
    assert job["payload"] == {"x": 1}
    assert job["priority"] == 4
    assert job["status"] == "queued"
    assert (await api.get(f"/schedules/{s['id']}")).json()["last_job_id"] == job["id"]
    other = await api.post(f"/schedules/{s['id']}/trigger")
    assert other.status_code == 201
    assert other.json()["job_id"] != job["id"]


async def test_delete_schedule(api: ProjectApi) -> None:
    # Another project's schedule ids: the generated walk in test_isolation.py covers every route.
    await api.queue("cron")
    s = await _schedule(api)
    assert (await api.delete(f"/schedules/{s['id']}")).status_code == 204
    assert_error(await api.get(f"/schedules/{s['id']}"), 404, "schedule_not_found")
