"""/projects/{project_id}/charts: the dashboard's charts, read from the rollup tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import Query

from codity import core
from codity.api.deps import DbPool, ProjectScope
from codity.api.resources._params import QueueFilter
from codity.api.routing import Route, Scope
from codity.api.schemas.charts import Charts, ChartWindow
from codity.api.stores.charts import read_charts
from codity.domain.states import MemberRole


async def read_project_charts(
    ctx: ProjectScope,
    pool: DbPool,
    window: Annotated[ChartWindow, Query(description="1h, 24h or 7d")] = ChartWindow.HOUR,
    queue: QueueFilter = None,
) -> Charts:
    queue_id = (await core.resolve_queue(pool, ctx.project_id, queue)).id if queue else None
    return await read_charts(pool, ctx.project_id, window, datetime.now(UTC), queue_id)


ROUTES: list[Route] = [
    Route("GET", "/projects/{project_id}/charts", read_project_charts, Scope.PROJECT,
          MemberRole.VIEWER,
          "Charts over 1h/24h/7d: depth, wait and run time p50/p95, completed/failed, per "
          "handler and per worker (from per-minute rollups, never a scan of jobs)",
          response_model=Charts, tags=("charts",)),
]  # fmt: skip
