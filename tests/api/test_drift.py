"""Routes as data: the app, the OpenAPI document and ALL_ROUTES cannot drift apart.

An endpoint registered any other way than through `mount_routes(ALL_ROUTES)` is caught, and so
is a PROJECT-scoped route that lacks the guard.
"""

from __future__ import annotations

import pytest
from fastapi import FastAPI

from codity.api.app import create_app
from codity.api.routes import ALL_ROUTES
from codity.api.routing import SCOPE_EXTENSION, Route, Scope, unmounted_routes
from codity.domain.states import MemberRole
from codity.settings import Settings


def test_the_real_app_matches_the_table(shared_app: FastAPI) -> None:
    assert unmounted_routes(shared_app, ALL_ROUTES) == []


def test_a_route_registered_outside_mount_routes_is_caught(api_settings: Settings) -> None:
    app = create_app(api_settings)

    @app.get("/api/v1/projects/{project_id}/backdoor")
    async def backdoor(project_id: str) -> dict[str, str]:
        return {"project": project_id}

    assert unmounted_routes(app, ALL_ROUTES) == [
        "GET /api/v1/projects/{project_id}/backdoor: registered outside mount_routes/ALL_ROUTES"
    ]


def test_a_table_entry_that_is_not_mounted_is_caught(api_settings: Settings) -> None:
    app = create_app(api_settings, routes=ALL_ROUTES[1:])
    first = ALL_ROUTES[0]
    assert unmounted_routes(app, ALL_ROUTES) == [
        f"{first.method} {first.full_path}: in ALL_ROUTES but not mounted"
    ]


def test_a_project_route_without_the_guard_is_caught(api_settings: Settings) -> None:
    app = create_app(api_settings, _guard=False)
    problems = unmounted_routes(app, ALL_ROUTES)
    project_routes = [r for r in ALL_ROUTES if r.scope is Scope.PROJECT]
    assert len(problems) == len(project_routes)
    assert all("guard is not attached" in p for p in problems)


def test_openapi_documents_exactly_the_table(shared_app: FastAPI) -> None:
    doc = shared_app.openapi()
    documented = {
        (method.upper(), path, op[SCOPE_EXTENSION])
        for path, ops in doc["paths"].items()
        if path.startswith("/api/v1")
        for method, op in ops.items()
    }
    declared = {(r.method, r.full_path, r.scope.value) for r in ALL_ROUTES}
    assert documented == declared


def test_openapi_error_responses_use_the_envelope(shared_app: FastAPI) -> None:
    doc = shared_app.openapi()
    for path, ops in doc["paths"].items():
        if not path.startswith("/api/v1"):
            continue
        for method, op in ops.items():
            for status in ("404", "422", "429"):
                schema = op["responses"][status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}, (
                    method,
                    path,
                    status,
                )
            if op[SCOPE_EXTENSION] != "public":
                assert op.get("security"), f"{method} {path} does not document bearer auth"


async def _noop() -> None:
    return None


def test_a_project_route_must_live_under_its_project() -> None:
    with pytest.raises(ValueError, match="PROJECT scope"):
        Route("GET", "/queues", _noop, Scope.PROJECT, MemberRole.VIEWER, "wrong")
    with pytest.raises(ValueError, match="PROJECT scope"):
        Route("GET", "/projects/{project_id}/x", _noop, Scope.ORG, MemberRole.VIEWER, "wrong")


def test_org_and_project_routes_must_name_a_role() -> None:
    with pytest.raises(ValueError, match="min_role"):
        Route("GET", "/org/thing", _noop, Scope.ORG, None, "no role")
    with pytest.raises(ValueError, match="min_role"):
        Route("GET", "/auth/thing", _noop, Scope.USER, MemberRole.VIEWER, "role on user scope")


def test_duplicate_entries_are_refused_at_mount(api_settings: Settings) -> None:
    with pytest.raises(ValueError, match="declared twice"):
        create_app(api_settings, routes=[ALL_ROUTES[0], ALL_ROUTES[0]])
    twin = Route("GET", "/auth/other", ALL_ROUTES[0].handler, Scope.USER, None, "same handler")
    with pytest.raises(ValueError, match="operation id"):
        create_app(
            api_settings,
            routes=[twin, Route("GET", "/auth/x", twin.handler, Scope.USER, None, "x")],
        )
