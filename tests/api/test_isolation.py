"""Tenant isolation and RBAC, walked over every entry of ALL_ROUTES.

Two layers, each with its break-it-first twin:
- the guard: another organisation's owner gets 404 on every PROJECT route; the same detector
  against an app mounted WITHOUT the guard (`create_app(..., _guard=False)`) reports every one;
- the data layer: my own project in the path with another project's resource id (path or
  body) finds nothing; the same probes against statements stripped of their tenant condition
  all fail.
"""

from __future__ import annotations

import re
import uuid
from types import MappingProxyType
from typing import Any

import asyncpg
import httpx
import pytest
from tests.api.conftest import MakeOrgUser, Session, app_client
from tests.api.isolation import (
    _PARAM,
    BODY_REFERENCES,
    PATH_REFERENCES,
    body_model,
    foreign_reference_failures,
    outsider_failures,
    reference_probes,
    unclassified_fields,
    viewer_failures,
)
from tests.factories import make_invitation, make_project

from codity.api.app import create_app
from codity.api.routes import ALL_ROUTES
from codity.api.routing import Scope
from codity.db import queries
from codity.domain.states import MemberRole
from codity.settings import Settings

PROJECT_ROUTES = [r for r in ALL_ROUTES if r.scope is Scope.PROJECT]
#: A tenant condition in a statement: `q.project_id = :project_id::uuid`, `org_id = $1`...
_TENANT = re.compile(r"\b(\w+\.)?(?:project_id|org_id) = (:\w+|\$\d+)(::uuid)?")


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
        victim = await register_and_login(client, api_db, org_name="Victim")
        thief = await register_and_login(client, api_db, org_name="Thief")
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
        extra_values={
            "user_id": colleague.user_id,
            "invitation_id": await make_invitation(api_db, owner.org_id),
        },
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
        # Everything is readable by a viewer but the owner's own list of invitations (emails of
        # people who are not members yet).
        expected = 200 if route.min_role is MemberRole.VIEWER else 403
        assert r.status_code == expected, f"{route.method} {route.path}: {r.status_code} {r.text}"


# --- the second layer: the data layer scopes every statement by the project ------------------


@pytest.fixture
async def other_project(owner: Session, api_db: asyncpg.Connection[Any]) -> uuid.UUID:
    """A second project of the owner's organisation: the guard lets the owner into both."""
    return await make_project(api_db, owner.org_id, "other")


def test_every_resource_reference_of_the_route_table_is_probed() -> None:
    probes = reference_probes(ALL_ROUTES)
    probed_paths = {(p.route.method, p.route.path) for p in probes if p.where[0] == "path"}
    with_ids = {
        (r.method, r.path)
        for r in ALL_ROUTES
        if r.min_role and any(param != "project_id" for param in _PARAM.findall(r.path))
    }
    assert probed_paths == with_ids
    assert {p.where[1] for p in probes if p.where[0] == "path"} == set(PATH_REFERENCES)
    probed_fields = {p.where[-1] for p in probes if p.where[0] == "body"}
    assert probed_fields == set(BODY_REFERENCES)  # every kind of body reference is exercised
    # A new body field that names something must be classified, or it would go unprobed.
    odd = {
        f"{r.method} {r.path}: {name}"
        for r in ALL_ROUTES
        if r.min_role and (model := body_model(r)) is not None
        for name in unclassified_fields(model)
    }
    assert odd == set(), "classify these in tests/api/isolation.py BODY_REFERENCES"


async def _reference_failures(
    client: httpx.AsyncClient,
    api_db: asyncpg.Connection[Any],
    owner: Session,
    outsider: Session,
    other_project: uuid.UUID,
    colleague: Session,
    *,
    controls: bool,
) -> tuple[list[Any], list[Any]]:
    probes = reference_probes(ALL_ROUTES)
    failures = await foreign_reference_failures(
        client,
        api_db,
        probes,
        project_id=owner.project_id,
        other_project_id=other_project,
        headers=owner.headers,
        own_values={"user_id": colleague.user_id},
        # a member and an invitation of another organisation
        foreign_values={
            "user_id": outsider.user_id,
            "invitation_id": await make_invitation(api_db, outsider.org_id),
        },
        controls=controls,
    )
    return probes, failures


async def test_another_projects_ids_find_nothing_through_my_project(
    client: httpx.AsyncClient,
    owner: Session,
    outsider: Session,
    other_project: uuid.UUID,
    make_org_user: MakeOrgUser,
    api_db: asyncpg.Connection[Any],
) -> None:
    colleague = await make_org_user("member")
    probes, failures = await _reference_failures(
        client, api_db, owner, outsider, other_project, colleague, controls=True
    )
    assert len(probes) >= 20
    assert failures == [], "\n".join(map(str, failures))


async def test_with_unscoped_statements_the_detector_flags_every_probe(
    client: httpx.AsyncClient,
    owner: Session,
    outsider: Session,
    other_project: uuid.UUID,
    make_org_user: MakeOrgUser,
    api_db: asyncpg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break it first: the same probes against statements whose tenant condition was removed
    (`q.project_id = :project_id` -> `:project_id IS NOT NULL`, likewise `org_id`) must all fail:
    the data layer's scoping is what stops them, not something else."""
    colleague = await make_org_user("member")
    scoped = queries.all_queries()
    unscoped = MappingProxyType(
        {name: _TENANT.sub(r"\2\3 IS NOT NULL", text) for name, text in scoped.items()}
    )
    assert sum(a != b for a, b in zip(scoped.values(), unscoped.values(), strict=True)) >= 30
    monkeypatch.setattr(queries, "all_queries", lambda: unscoped)
    queries._numbered.cache_clear()
    queries._spliced.cache_clear()  # the engine's statements with fragments (an enqueue's)
    try:
        probes, failures = await _reference_failures(
            client, api_db, owner, outsider, other_project, colleague, controls=False
        )
    finally:
        queries._numbered.cache_clear()
        queries._spliced.cache_clear()
    flagged = {str(f.probe) for f in failures}
    missed = [str(p) for p in probes if str(p) not in flagged]
    assert missed == [], f"removing the tenant condition went unnoticed on: {missed}"
