"""`report.generate` aggregates the database: figures here are computed independently in Python
from the rows the test inserted, then compared with what the handler stored."""

from __future__ import annotations

import statistics
from datetime import timedelta
from typing import Any

import asyncpg
from tests.factories import make_execution, make_job, make_queue, make_tenant, make_worker

from codity.worker.handlers.report import build_report


async def _job(db: asyncpg.Connection[Any], queue_id: Any, status: str) -> int:
    return await make_job(db, queue_id, status=status)


async def _execution(
    db: asyncpg.Connection[Any],
    job_id: int,
    queue_id: Any,
    seq: int,
    status: str,
    ms: int,
    age_h: float = 0,
) -> None:
    finished = await db.fetchval("SELECT now()") - timedelta(hours=age_h)
    await make_execution(
        db, job_id, queue_id, status=status, execution_seq=seq, attempt=seq,
        started_at=finished - timedelta(milliseconds=ms), finished_at=finished,
    )  # fmt: skip


def _pct(values: list[int], q: float) -> float:
    """percentile_cont: linear interpolation between closest ranks."""
    values = sorted(values)
    pos = (len(values) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(values) - 1)
    return round(values[lo] + (values[hi] - values[lo]) * (pos - lo), 1)


async def test_report_counts_rates_and_percentiles_per_queue(db: asyncpg.Connection[Any]) -> None:
    tenant = await make_tenant(db)
    emails = await make_queue(db, tenant.project_id, name="emails")
    idle = await make_queue(db, tenant.project_id, name="idle")
    other_tenant_queue = await make_queue(db)  # another project: must not appear
    await make_worker(db)

    durations = [100, 200, 300, 400, 1000]
    for seq, ms in enumerate(durations, start=1):
        job = await _job(db, emails, "completed")
        await _execution(db, job, emails, seq, "completed", ms)
    failed_job = await _job(db, emails, "dead_letter")
    await _execution(db, failed_job, emails, 1, "failed", 50)
    await _execution(db, failed_job, emails, 2, "timed_out", 5000)
    await _execution(db, failed_job, emails, 3, "lost", 10)  # infrastructure: not a verdict
    await _execution(db, failed_job, emails, 4, "completed", 999_999, age_h=48)  # outside window
    await _job(db, emails, "queued")
    await _job(db, other_tenant_queue, "queued")

    report = await build_report(db, emails, 24)

    by_name = {q["queue"]: q for q in report["queues"]}
    assert set(by_name) == {"emails", "idle"}
    e = by_name["emails"]
    assert e["jobs_by_status"] == {"completed": 5, "dead_letter": 1, "queued": 1}
    assert e["executions"] == 8
    assert (e["completed"], e["failed"]) == (5, 2)
    assert e["success_rate"] == round(5 / 7, 4)
    assert e["p50_ms"] == statistics.median(durations)
    assert e["p95_ms"] == _pct(durations, 0.95)
    assert by_name["idle"] == {
        "queue": "idle", "queue_id": str(idle), "jobs_by_status": {}, "executions": 0,
        "completed": 0, "failed": 0, "success_rate": None, "p50_ms": None, "p95_ms": None,
    }  # fmt: skip
    assert report["window_hours"] == 24
