"""ALL_ROUTES: the one table of every endpoint under /api/v1.

It feeds the router (`routing.mount_routes`), the OpenAPI document, the isolation test and
`docs/API_CONTRACT.md`. A resource module exports `ROUTES`; add it here, once.
"""

from __future__ import annotations

from codity.api.resources import (
    api_keys,
    auth,
    bulk_actions,
    charts,
    dead_letters,
    events,
    jobs,
    members,
    orgs,
    overview,
    projects,
    queues,
    retry_policies,
    schedules,
    workers,
)
from codity.api.routing import Route

ALL_ROUTES: tuple[Route, ...] = (
    *auth.ROUTES,
    *orgs.ROUTES,
    *members.ROUTES,
    *projects.ROUTES,
    *api_keys.ROUTES,
    *retry_policies.ROUTES,
    *queues.ROUTES,
    *jobs.ROUTES,
    *schedules.ROUTES,
    *dead_letters.ROUTES,
    *bulk_actions.ROUTES,
    *workers.ROUTES,
    *overview.ROUTES,
    *charts.ROUTES,
    *events.ROUTES,
)
