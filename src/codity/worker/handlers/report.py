"""`report.generate`: a real aggregation of the job's own project, computed in PostgreSQL.

For every queue of the project that owns the job's queue: jobs by status (created within the
window), and from `job_executions` finished within the window the success rate and the p50/p95
duration of completed attempts. Lost and released attempts are infrastructure events, not
verdicts on the handler, so they count in `executions` but not in the success rate.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from codity.worker.context import JobContext
from codity.worker.handlers.basic import HandlerInputError
from codity.worker.registry import handler

DEFAULT_WINDOW_HOURS = 24
MAX_WINDOW_HOURS = 24 * 90

_PROJECT_QUEUES = """
SELECT q.id, q.name FROM queues q
WHERE q.project_id = (SELECT project_id FROM queues WHERE id = $1::uuid)
ORDER BY q.name
"""

_STATUS_COUNTS = """
SELECT queue_id, status::text AS status, count(*) AS n
FROM jobs
WHERE queue_id = ANY($1::uuid[]) AND created_at >= now() - $2::integer * interval '1 hour'
GROUP BY queue_id, status
"""

_EXECUTION_STATS = """
SELECT queue_id,
       count(*) AS executions,
       count(*) FILTER (WHERE status = 'completed') AS completed,
       count(*) FILTER (WHERE status IN ('failed', 'timed_out')) AS failed,
       percentile_cont(0.5) WITHIN GROUP (
         ORDER BY extract(epoch FROM finished_at - coalesce(started_at, claimed_at)) * 1000
       ) FILTER (WHERE status = 'completed') AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (
         ORDER BY extract(epoch FROM finished_at - coalesce(started_at, claimed_at)) * 1000
       ) FILTER (WHERE status = 'completed') AS p95_ms
FROM job_executions
WHERE queue_id = ANY($1::uuid[]) AND finished_at >= now() - $2::integer * interval '1 hour'
GROUP BY queue_id
"""


def _window_hours(payload: Any) -> int:
    value = (
        (payload or {}).get("window_hours", DEFAULT_WINDOW_HOURS)
        if isinstance(payload, dict | None)
        else None
    )
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WINDOW_HOURS:
        raise HandlerInputError(
            f"payload.window_hours must be an integer from 1 to {MAX_WINDOW_HOURS}"
        )
    return value


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 1)


async def build_report(conn: Any, queue_id: Any, window_hours: int) -> dict[str, Any]:
    queues = await conn.fetch(_PROJECT_QUEUES, queue_id)
    ids = [q["id"] for q in queues]
    counts: dict[Any, dict[str, int]] = {}
    for row in await conn.fetch(_STATUS_COUNTS, ids, window_hours):
        counts.setdefault(row["queue_id"], {})[row["status"]] = row["n"]
    stats = {row["queue_id"]: row for row in await conn.fetch(_EXECUTION_STATS, ids, window_hours)}
    report_queues = []
    for q in queues:
        s = stats.get(q["id"])
        completed = s["completed"] if s else 0
        failed = s["failed"] if s else 0
        judged = completed + failed
        report_queues.append(
            {
                "queue": q["name"],
                "queue_id": str(q["id"]),
                "jobs_by_status": counts.get(q["id"], {}),
                "executions": s["executions"] if s else 0,
                "completed": completed,
                "failed": failed,
                "success_rate": round(completed / judged, 4) if judged else None,
                "p50_ms": _round(s["p50_ms"]) if s else None,
                "p95_ms": _round(s["p95_ms"]) if s else None,
            }
        )
    return {
        "generated_at": datetime.now(UTC).isoformat(),
        "window_hours": window_hours,
        "queues": report_queues,
    }


@handler("report.generate")
async def report_generate(ctx: JobContext) -> dict[str, Any]:
    window = _window_hours(ctx.payload)
    report = await build_report(ctx.db, ctx.queue_id, window)
    ctx.logger.info("report generated", queues=len(report["queues"]), window_hours=window)
    return report
