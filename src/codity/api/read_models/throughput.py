"""Completed/failed executions per minute over the last hour, and duration percentiles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import asyncpg

from codity.api.schemas.queues import DurationPercentiles, ThroughputBucket
from codity.core import Conn

#: One row per minute of the last hour, even minutes with no execution (zeros, not gaps).
#: `failed` counts every attempt that ended in error or timeout, including the last one before
#: the dead-letter queue. Uses ix_job_executions_queue_finished (queue_id, finished_at).
THROUGHPUT_SQL = """
SELECT m.minute,
       count(e.id) FILTER (WHERE e.status = 'completed') AS completed,
       count(e.id) FILTER (WHERE e.status IN ('failed', 'timed_out')) AS failed
FROM generate_series(date_trunc('minute', now()) - interval '59 minutes',
                     date_trunc('minute', now()), interval '1 minute') AS m(minute)
LEFT JOIN job_executions e
       ON e.queue_id = ANY($1::uuid[])
      AND e.finished_at >= m.minute AND e.finished_at < m.minute + interval '1 minute'
GROUP BY m.minute
ORDER BY m.minute
"""

#: Wait = claimed_at - run_at of jobs claimed in the last hour (the job row holds the current
#: attempt's run_at, so each job contributes its latest attempt).
WAIT_SQL = """
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY w) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY w) AS p95,
       count(*) AS samples
FROM (SELECT extract(epoch FROM j.claimed_at - j.run_at) * 1000 AS w
      FROM jobs j
      WHERE j.queue_id = $1 AND j.claimed_at >= now() - interval '1 hour'
        AND j.claimed_at >= j.run_at) s
"""

#: Run time = finished_at - started_at of attempts that ended in the last hour.
RUN_SQL = """
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY r) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY r) AS p95,
       count(*) AS samples
FROM (SELECT extract(epoch FROM e.finished_at - e.started_at) * 1000 AS r
      FROM job_executions e
      WHERE e.queue_id = $1 AND e.finished_at >= now() - interval '1 hour'
        AND e.started_at IS NOT NULL) s
"""


async def last_hour_throughput(conn: Conn, queue_ids: Sequence[UUID]) -> list[ThroughputBucket]:
    rows = await conn.fetch(THROUGHPUT_SQL, list(queue_ids))
    return [
        ThroughputBucket(minute=r["minute"], completed=r["completed"], failed=r["failed"])
        for r in rows
    ]


def _percentiles(row: asyncpg.Record) -> DurationPercentiles:
    def ms(value: Any) -> float | None:
        return None if value is None else round(float(value), 3)

    return DurationPercentiles(p50_ms=ms(row["p50"]), p95_ms=ms(row["p95"]), samples=row["samples"])


async def wait_percentiles(conn: Conn, queue_id: UUID) -> DurationPercentiles:
    row = await conn.fetchrow(WAIT_SQL, queue_id)
    assert row is not None  # an aggregate always answers one row
    return _percentiles(row)


async def run_percentiles(conn: Conn, queue_id: UUID) -> DurationPercentiles:
    row = await conn.fetchrow(RUN_SQL, queue_id)
    assert row is not None
    return _percentiles(row)
