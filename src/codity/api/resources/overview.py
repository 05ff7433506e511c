"""/projects/{project_id}/overview: totals, throughput, workers, dead letters, health."""

from __future__ import annotations

from codity.api.deps import AppSettings, DbPool, ProjectScope
from codity.api.routing import Route, Scope
from codity.api.schemas.overview import Overview
from codity.api.stores.overview import project_overview
from codity.domain.states import MemberRole


async def read_overview(ctx: ProjectScope, pool: DbPool, settings: AppSettings) -> Overview:
    return await project_overview(
        pool, ctx.project_id, scheduler_tick_ms=settings.scheduler_tick_ms
    )


ROUTES: list[Route] = [
    Route("GET", "/projects/{project_id}/overview", read_overview, Scope.PROJECT,
          MemberRole.VIEWER, "The project at a glance", response_model=Overview,
          tags=("overview",)),
]  # fmt: skip
