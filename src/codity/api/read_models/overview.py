"""A project at a glance: job totals, throughput, workers, dead letters and health."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from codity.api.read_models.throughput import last_hour_throughput
from codity.api.schemas.overview import Health, Overview, WorkerCounts
from codity.api.schemas.queues import QueueDepth
from codity.core import Conn

_TOTALS_SQL = """
SELECT j.status::text AS status, count(*) AS n
FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE q.project_id = $1
GROUP BY j.status
"""

_QUEUES_SQL = """
SELECT array_agg(id) AS ids, count(*) AS total, count(*) FILTER (WHERE is_paused) AS paused
FROM queues WHERE project_id = $1
"""

_WORKERS_SQL = """
SELECT w.status::text AS status, count(DISTINCT w.id) AS n
FROM workers w JOIN worker_queues wq ON wq.worker_id = w.id
WHERE wq.queue_id = ANY($1::uuid[])
GROUP BY w.status
"""

_DEAD_LETTERS_SQL = """
SELECT count(*) FROM dead_letter_jobs
WHERE queue_id = ANY($1::uuid[]) AND replayed_at IS NULL
"""

#: Oldest claimable job (on an unpaused queue); and how overdue the scheduler is: the promoter
#: should have moved every due `scheduled` job, and the cron loop every due enabled schedule.
_HEALTH_SQL = """
SELECT
  (SELECT extract(epoch FROM now() - min(j.run_at))
   FROM jobs j JOIN queues q ON q.id = j.queue_id
   WHERE j.queue_id = ANY($1::uuid[]) AND j.status = 'queued' AND j.run_at <= now()
     AND NOT q.is_paused) AS oldest_queued_age_s,
  greatest(
    (SELECT extract(epoch FROM now() - min(run_at)) FROM jobs
     WHERE queue_id = ANY($1::uuid[]) AND status = 'scheduled' AND run_at <= now()),
    (SELECT extract(epoch FROM now() - min(next_run_at)) FROM scheduled_jobs
     WHERE queue_id = ANY($1::uuid[]) AND enabled AND next_run_at <= now())
  ) AS scheduler_lag_s
"""


def _seconds(value: Any) -> float | None:
    return None if value is None else round(max(0.0, float(value)), 3)


async def project_overview(conn: Conn, project_id: UUID, *, scheduler_tick_ms: int) -> Overview:
    totals = {r["status"]: r["n"] for r in await conn.fetch(_TOTALS_SQL, project_id)}
    queues = await conn.fetchrow(_QUEUES_SQL, project_id)
    assert queues is not None  # an aggregate always answers one row
    queue_ids = list(queues["ids"] or [])
    workers = {r["status"]: r["n"] for r in await conn.fetch(_WORKERS_SQL, queue_ids)}
    health = await conn.fetchrow(_HEALTH_SQL, queue_ids)
    assert health is not None
    lag = _seconds(health["scheduler_lag_s"])
    # Three ticks of slack: a due job waits up to one tick for the promoter by design.
    scheduler_ok = lag is None or lag * 1000 <= 3 * scheduler_tick_ms
    return Overview(
        totals=QueueDepth(**totals),
        queues=queues["total"],
        paused_queues=queues["paused"],
        throughput=await last_hour_throughput(conn, queue_ids),
        workers=WorkerCounts(
            active=workers.get("active", 0),
            draining=workers.get("draining", 0),
            stopped=workers.get("stopped", 0),
            dead=workers.get("dead", 0),
        ),
        dead_letters=await conn.fetchval(_DEAD_LETTERS_SQL, queue_ids),
        health=Health(
            database_ok=True,  # every number above came from it
            oldest_queued_age_s=_seconds(health["oldest_queued_age_s"]),
            scheduler_lag_s=lag,
            scheduler_ok=scheduler_ok,
        ),
    )
