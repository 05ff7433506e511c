"""Search that does not hurt: payload `path = value` and error text, through their indexes."""

from __future__ import annotations

import uuid

from tests.api.project_api import ProjectApi, assert_error, resource_fixtures
from tests.factories import make_finished_attempt

shared_app_fixture, api_fixture = resource_fixtures()


async def test_payload_path_equals_value_and_error_words(api: ProjectApi) -> None:
    await api.queue("billing")
    ids = {}
    for n, customer in enumerate((42, 43, 42)):
        r = await api.post(
            "/jobs",
            {
                "queue": "billing",
                "handler": "invoice",
                "payload": {"customer_id": customer, "order": {"id": f"A-{n}"}},
            },
        )
        ids[n] = r.json()["id"]
    found = (await api.get("/jobs", params={"payload": "payload.customer_id = 42"})).json()
    assert sorted(j["id"] for j in found["items"]) == sorted([ids[0], ids[2]])
    nested = (await api.get("/jobs", params={"payload": 'order.id = "A-1"'})).json()
    assert [j["id"] for j in nested["items"]] == [ids[1]]
    word = (await api.get("/jobs", params={"payload": "order.id = A-1"})).json()
    assert [j["id"] for j in word["items"]] == [ids[1]]  # a bare word is a string
    assert (await api.get("/jobs", params={"payload": "customer_id = 7"})).json()["items"] == []
    for bad in ("customer_id", "a..b = 1", "x = "):
        assert_error(await api.get("/jobs", params={"payload": bad}), 422, "validation_error")

    queue_id = uuid.UUID((await api.queue("smtp"))["id"])
    at = "2026-03-01T09:00:00+00:00"
    from datetime import datetime

    when = datetime.fromisoformat(at)
    refused = await make_finished_attempt(api.pool, queue_id, run_at=when, started_at=when,
        finished_at=when, status="failed", error="SMTP 550: mailbox unavailable")  # fmt: skip
    await make_finished_attempt(api.pool, queue_id, run_at=when, started_at=when,
        finished_at=when, status="failed", error="connection timed out")  # fmt: skip
    hits = (await api.get("/jobs", params={"error": "mailbox unavailable"})).json()["items"]
    assert [j["id"] for j in hits] == [refused]
    assert (await api.get("/jobs", params={"error": "mailbox timed"})).json()["items"] == []
