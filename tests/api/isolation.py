"""The tenant-isolation detector, walked over ALL_ROUTES.

`outsider_failures` calls every PROJECT-scoped route of a victim's project as the owner of
ANOTHER organisation (the highest role, so only the tenancy guard can stop it), with real ids of
fresh victim resources in the path and a valid body, and reports each route that does not answer
404 or that changed any row of the database. `viewer_failures` calls every mutating ORG/PROJECT
route as a viewer of the victim's own organisation and reports each that does not answer 403 or
changed a row. An empty list means the property holds; the tests also prove the detector by
running it against an app mounted without the guard.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
from tests.factories import (
    make_api_key,
    make_dead_letter,
    make_job,
    make_queue,
    make_retry_policy,
    make_schedule,
)

from codity.api.routing import API_PREFIX, Route, Scope
from codity.db.tables import metadata

# Counters of the rate limiter are bookkeeping, not tenant data.
_NOT_TENANT_DATA = frozenset({"rate_limit_buckets"})


@dataclass(frozen=True)
class Failure:
    route: Route
    status: int
    changed: bool

    def __str__(self) -> str:
        change = ", changed rows" if self.changed else ""
        return f"{self.route.method} {self.route.path}: answered {self.status}{change}"


async def snapshot(conn: asyncpg.Connection[Any]) -> dict[str, str]:
    """A digest of every row of every table: any insert, update or delete changes it."""
    names = [t.name for t in metadata.sorted_tables if t.name not in _NOT_TENANT_DATA]
    parts = [
        f"SELECT '{name}' AS t, md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) AS d "
        f"FROM {name} x"
        for name in names
    ]
    rows = await conn.fetch(" UNION ALL ".join(parts))
    return {r["t"]: r["d"] for r in rows}


async def seed(conn: asyncpg.Connection[Any], project_id: uuid.UUID) -> dict[str, Any]:
    """Fresh victim resources for one probe, so no probe depends on what an earlier one did."""
    tag = uuid.uuid4().hex[:8]
    policy_id = await make_retry_policy(
        conn, project_id, strategy="fixed", base_delay_ms=10, max_delay_ms=10, max_attempts=3
    )
    queue_name = f"q-{tag}"
    queue_id = await make_queue(conn, project_id, name=queue_name)
    job_id = await make_job(conn, queue_id, handler="noop", payload={"secret": "victim"})
    schedule_id = await make_schedule(
        conn, queue_id, name=f"s-{tag}", next_run_at=datetime.now(UTC) + timedelta(hours=1)
    )
    dead_letter_id = await make_dead_letter(conn, queue_id)
    key_id = await make_api_key(conn, project_id, name=f"k-{tag}")
    return {
        "project_id": project_id,
        "policy_id": policy_id,
        "queue_id": queue_id,
        "queue_name": queue_name,
        "job_id": job_id,
        "schedule_id": schedule_id,
        "dead_letter_id": dead_letter_id,
        "key_id": key_id,
        "tag": tag,
    }


#: A valid body per (method, path) so that, without the guard, the call would really succeed.
BODIES: dict[tuple[str, str], Callable[[dict[str, Any]], Any]] = {
    ("PATCH", "/projects/{project_id}"): lambda s: {"name": "renamed by outsider"},
    ("POST", "/projects/{project_id}/api-keys"): lambda s: {"name": "stolen", "role": "viewer"},
    ("POST", "/projects/{project_id}/retry-policies"): lambda s: {"name": f"x-{s['tag']}"},
    ("PATCH", "/projects/{project_id}/retry-policies/{policy_id}"): lambda s: {"max_attempts": 5},
    ("POST", "/projects/{project_id}/queues"): lambda s: {"name": f"x-{s['tag']}"},
    ("PATCH", "/projects/{project_id}/queues/{queue_id}"): lambda s: {"priority": 5},
    ("POST", "/projects/{project_id}/jobs"): lambda s: {
        "queue": s["queue_name"],
        "handler": "noop",
    },
    ("POST", "/projects/{project_id}/jobs/bulk"): lambda s: {
        "queue": s["queue_name"],
        "jobs": [{"handler": "noop"}],
    },
    ("POST", "/projects/{project_id}/schedules"): lambda s: {
        "queue": s["queue_name"],
        "name": f"x-{s['tag']}",
        "cron_expression": "* * * * *",
        "handler": "noop",
    },
    ("POST", "/projects/{project_id}/schedules/validate"): lambda s: {
        "cron_expression": "* * * * *"
    },
    ("PATCH", "/projects/{project_id}/schedules/{schedule_id}"): lambda s: {"name": "renamed"},
    ("POST", "/projects/{project_id}/dead-letters/replay"): lambda s: {
        "ids": [str(s["dead_letter_id"])]
    },
    ("POST", "/projects/{project_id}/dead-letters/discard"): lambda s: {
        "ids": [str(s["dead_letter_id"])]
    },
}

_PARAM = re.compile(r"{(\w+)}")


def fill_path(route: Route, values: dict[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise AssertionError(
                f"{route.method} {route.path}: the isolation test does not know how to make a "
                f"{name!r}; add it to tests/api/isolation.py seed()"
            )
        return str(values[name])

    return API_PREFIX + _PARAM.sub(value, route.path)


def body_for(route: Route, values: dict[str, Any]) -> Any:
    maker = BODIES.get((route.method, route.path))
    if maker is not None:
        return maker(values)
    return {} if route.method in ("POST", "PUT", "PATCH") else None


def _probe_order(route: Route) -> tuple[int, str]:
    # Deleting the project cascades to everything: probe it last.
    last = route.method == "DELETE" and route.path == "/projects/{project_id}"
    return (1 if last else 0, route.path)


async def _call(
    client: httpx.AsyncClient, route: Route, path: str, headers: dict[str, str], body: Any
) -> httpx.Response:
    kwargs: dict[str, Any] = {"headers": headers}
    if body is not None:
        kwargs["json"] = body
    return await client.request(route.method, path, **kwargs)


async def outsider_failures(
    client: httpx.AsyncClient,
    conn: asyncpg.Connection[Any],
    routes: Sequence[Route],
    *,
    victim_project_id: uuid.UUID,
    outsider_headers: dict[str, str],
) -> list[Failure]:
    failures: list[Failure] = []
    for route in sorted((r for r in routes if r.scope is Scope.PROJECT), key=_probe_order):
        values = await seed(conn, victim_project_id)
        before = await snapshot(conn)
        r = await _call(
            client, route, fill_path(route, values), outsider_headers, body_for(route, values)
        )
        changed = await snapshot(conn) != before
        ok = r.status_code == 404 and r.json()["error"]["code"] == "project_not_found"
        if not ok or changed:
            failures.append(Failure(route, r.status_code, changed))
    return failures


async def viewer_failures(
    client: httpx.AsyncClient,
    conn: asyncpg.Connection[Any],
    routes: Sequence[Route],
    *,
    project_id: uuid.UUID,
    viewer_headers: dict[str, str],
    extra_values: dict[str, Any],
) -> list[Failure]:
    failures: list[Failure] = []
    scoped = (r for r in routes if r.mutating and r.scope in (Scope.ORG, Scope.PROJECT))
    for route in sorted(scoped, key=_probe_order):
        values = {**await seed(conn, project_id), **extra_values}
        before = await snapshot(conn)
        r = await _call(
            client, route, fill_path(route, values), viewer_headers, body_for(route, values)
        )
        changed = await snapshot(conn) != before
        if r.status_code != 403 or r.json()["error"]["code"] != "forbidden" or changed:
            failures.append(Failure(route, r.status_code, changed))
    return failures
