"""Tenant isolation and RBAC, walked over every entry of ALL_ROUTES.

Break it first: the same detector run against an app mounted WITHOUT the tenancy guard
(`create_app(..., _guard=False)`, a test-only switch) must report every PROJECT-scoped route.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
from tests.api.conftest import MakeOrgUser, Session, app_client
from tests.api.isolation import outsider_failures, viewer_failures

from codity.api.app import create_app
from codity.api.routes import ALL_ROUTES
from codity.api.routing import Scope
from codity.settings import Settings

PROJECT_ROUTES = [r for r in ALL_ROUTES if r.scope is Scope.PROJECT]


def test_the_table_has_project_routes_to_check() -> None:
    # Guards against a vacuous pass: the walk below must cover the real table.
    assert len(PROJECT_ROUTES) >= 10
    assert any(r.mutating for r in PROJECT_ROUTES)


async def test_another_orgs_owner_gets_404_on_every_project_route_and_nothing_changes(
    client: httpx.AsyncClient, owner: Session, outsider: Session, api_db: asyncpg.Connection[Any]
) -> None:
    failures = await outsider_failures(
        client,
        api_db,
        ALL_ROUTES,
        victim_project_id=owner.project_id,
        outsider_headers=outsider.headers,
    )
    assert failures == [], "\n".join(map(str, failures))


async def test_without_the_guard_the_detector_flags_every_project_route(
    api_settings: Settings, api_db: asyncpg.Connection[Any]
) -> None:
    from tests.api.conftest import register_and_login

    unguarded = create_app(api_settings, _guard=False)
    async with app_client(unguarded) as client:
        victim = await register_and_login(client, org_name="Victim")
        thief = await register_and_login(client, org_name="Thief")
        failures = await outsider_failures(
            client,
            api_db,
            ALL_ROUTES,
            victim_project_id=victim.project_id,
            outsider_headers=thief.headers,
        )
    flagged = {(f.route.method, f.route.path) for f in failures}
    missed = [f"{r.method} {r.path}" for r in PROJECT_ROUTES if (r.method, r.path) not in flagged]
    assert missed == [], f"the detector did not notice the missing guard on: {missed}"
    # And the leak is real, not just a different error: reads answered the victim's data...
    reads = [f for f in failures if not f.route.mutating]
    assert reads
    assert all(f.status == 200 for f in reads), [str(f) for f in reads]
    # ...and writes changed the victim's rows.
    assert any(f.changed for f in failures)


async def test_a_viewer_gets_403_on_every_mutating_route_and_nothing_changes(
    client: httpx.AsyncClient,
    owner: Session,
    make_org_user: MakeOrgUser,
    api_db: asyncpg.Connection[Any],
) -> None:
    viewer = await make_org_user("viewer")
    colleague = await make_org_user("member")
    failures = await viewer_failures(
        client,
        api_db,
        ALL_ROUTES,
        project_id=owner.project_id,
        viewer_headers=viewer.headers,
        extra_values={"user_id": colleague.user_id},
    )
    assert failures == [], "\n".join(map(str, failures))
    mutating = [r for r in ALL_ROUTES if r.mutating and r.scope in (Scope.ORG, Scope.PROJECT)]
    assert len(mutating) >= 10


async def test_a_viewer_can_read_every_org_and_project_route(
    client: httpx.AsyncClient,
    owner: Session,
    make_org_user: MakeOrgUser,
    api_db: asyncpg.Connection[Any],
) -> None:
    from tests.api.isolation import fill_path, seed

    viewer = await make_org_user("viewer")
    values = await seed(api_db, owner.project_id)
    reads = [r for r in ALL_ROUTES if not r.mutating and r.scope in (Scope.ORG, Scope.PROJECT)]
    for route in reads:
        r = await client.get(fill_path(route, values), headers=viewer.headers)
        assert r.status_code == 200, f"{route.method} {route.path}: {r.status_code} {r.text}"
