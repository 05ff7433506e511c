"""Enqueue through the API, a real `codity worker` process runs the job (and a real
`codity scheduler` promotes its retry), and the API's job detail shows the execution history
and the logs the handler wrote."""

from __future__ import annotations

import pytest
from tests.acceptance.services.service_procs import Procs, wait_for
from tests.acceptance.services.service_procs import procs as procs_fixture
from tests.api.project_api import project_api

__all__ = ["procs_fixture"]


@pytest.mark.slow
async def test_enqueue_via_api_worker_runs_detail_shows_history(
    database_url: str, procs_fixture: Procs
) -> None:
    procs = procs_fixture
    async with project_api(database_url) as api:
        policy = await api.post(
            "/retry-policies",
            {"name": "quick", "strategy": "fixed", "base_delay_ms": 100, "max_delay_ms": 100,
             "max_attempts": 3, "jitter": False},
        )  # fmt: skip
        await api.queue("e2e", retry_policy_id=policy.json()["id"])
        procs.spawn("scheduler", name="scheduler")
        procs.spawn(
            "worker", "--app", "tests.acceptance.api_e2e_app", "--queues", "e2e", name="worker"
        )

        r = await api.post(
            "/jobs", {"queue": "e2e", "handler": "e2e.greet", "payload": {"name": "Ada"}}
        )
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]

        async def finished() -> dict[str, object] | None:
            detail = (await api.get(f"/jobs/{job_id}")).json()
            return detail if detail["status"] in ("completed", "dead_letter") else None

        detail = await wait_for(finished, timeout_s=60, interval_s=0.2, what="the job to finish")
        assert detail["status"] == "completed", detail
        assert detail["result"] == {"greeting": "hello Ada"}
        assert detail["attempt"] == 2
        assert detail["progress"] == 100
        history = [(e["execution_seq"], e["attempt"], e["status"]) for e in detail["executions"]]
        assert history == [(1, 1, "failed"), (2, 2, "completed")]
        assert "first attempt fails on purpose" in detail["executions"][0]["error"]
        assert all(e["worker_id"] == detail["worker_id"] for e in detail["executions"])
        logged = [(entry["execution_seq"], entry["message"]) for entry in detail["logs"]]
        assert (1, "greeting") in logged
        assert (2, "greeting") in logged
        assert all(
            entry["fields"].get("who_len") == 3
            for entry in detail["logs"]
            if entry["message"] == "greeting"
        )

        workers = (await api.get("/workers")).json()["items"]
        assert [w["id"] for w in workers] == [detail["worker_id"]]
        assert [q["name"] for q in workers[0]["queues"]] == ["e2e"]
        stats = (await api.get(f"/queues/{detail['queue_id']}/stats")).json()
        assert sum(b["completed"] for b in stats["throughput"]) == 1
        assert sum(b["failed"] for b in stats["throughput"]) == 1
