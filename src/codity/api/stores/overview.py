"""A project at a glance: job totals, throughput, workers, dead letters and health.
SQL: `db/sql/api_overview.sql` (throughput: the queues store's)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from codity.api.schemas.overview import Health, Overview, WorkerCounts
from codity.api.schemas.queues import QueueDepth
from codity.api.stores.queues import last_hour_throughput
from codity.core import Conn
from codity.db.queries import Bound, bind


def _seconds(value: Any) -> float | None:
    return None if value is None else round(max(0.0, float(value)), 3)


async def project_overview(conn: Conn, project_id: UUID, *, scheduler_tick_ms: int) -> Overview:
    def q(name: str) -> Bound:
        return bind(name, project_id=project_id)

    totals = {r["status"]: r["n"] for r in await q("api_overview_totals").fetch(conn)}
    queues = await q("api_overview_queues").fetchrow(conn)
    assert queues is not None  # an aggregate always answers one row
    workers = {r["status"]: r["n"] for r in await q("api_overview_workers").fetch(conn)}
    health = await q("api_overview_health").fetchrow(conn)
    assert health is not None
    lag = _seconds(health["scheduler_lag_s"])
    # Three ticks of slack: a due job waits up to one tick for the promoter by design.
    scheduler_ok = lag is None or lag * 1000 <= 3 * scheduler_tick_ms
    return Overview(
        totals=QueueDepth(**totals),
        queues=queues["total"],
        paused_queues=queues["paused"],
        throughput=await last_hour_throughput(conn, project_id),
        workers=WorkerCounts(
            active=workers.get("active", 0),
            draining=workers.get("draining", 0),
            stopped=workers.get("stopped", 0),
            dead=workers.get("dead", 0),
        ),
        dead_letters=await q("api_overview_dead_letters").fetchval(conn),
        health=Health(
            database_ok=True,  # every number above came from it
            oldest_queued_age_s=_seconds(health["oldest_queued_age_s"]),
            scheduler_lag_s=lag,
            scheduler_ok=scheduler_ok,
        ),
    )
