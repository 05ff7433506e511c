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

import copy
import inspect
import re
import typing
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
from pydantic import BaseModel
from tests.factories import (
    make_api_key,
    make_bulk_action,
    make_dead_letter,
    make_job,
    make_queue,
    make_retry_policy,
    make_schedule,
)
from tests.waiting import wait_for

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
    bulk_action_id = await make_bulk_action(conn, project_id, job_ids=[job_id])
    return {
        "project_id": project_id,
        "policy_id": policy_id,
        "queue_id": queue_id,
        "queue_name": queue_name,
        "job_id": job_id,
        "schedule_id": schedule_id,
        "dead_letter_id": dead_letter_id,
        "key_id": key_id,
        "bulk_action_id": bulk_action_id,
        "tag": tag,
    }


#: A valid body per (method, path) so that, without the guard, the call would really succeed.
BODIES: dict[tuple[str, str], Callable[[dict[str, Any]], Any]] = {
    ("PATCH", "/org/members/{user_id}"): lambda s: {"role": "viewer"},
    ("POST", "/org/invitations"): lambda s: {"email": f"x-{s['tag']}@example.test"},
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
    ("POST", "/projects/{project_id}/jobs/bulk-actions"): lambda s: {
        "action": "cancel",
        "ids": [s["job_id"]],
    },
    ("POST", "/projects/{project_id}/dead-letters/bulk-actions"): lambda s: {
        "action": "discard",
        "ids": [str(s["dead_letter_id"])],
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


# --- the second layer: my project in the path, another project's resource ids -----------------
#
# The guard above proves a caller cannot name another tenant's PROJECT. These probes prove the
# data layer: with the caller's own project in the path (the guard lets it through), a resource
# id of another project — in the path or in the body — finds nothing, answers 404 (or 422 where
# enqueue validates a reference) and changes no row. The probes are generated from the route
# table: every path parameter and every body field that names a resource is probed.

#: Path parameters that name a resource, and the code a foreign id must answer.
PATH_REFERENCES: dict[str, str] = {
    "queue_id": "queue_not_found",
    "job_id": "job_not_found",
    "schedule_id": "schedule_not_found",
    "policy_id": "retry_policy_not_found",
    "key_id": "api_key_not_found",
    "dead_letter_id": "dead_letter_not_found",
    "bulk_action_id": "bulk_action_not_found",
    "user_id": "member_not_found",
    "invitation_id": "invitation_not_found",
}
#: Body fields that name a resource: how to make the reference from a seed's values.
BODY_REFERENCES: dict[str, Callable[[dict[str, Any]], list[Any]]] = {
    # a queue is named by name or by id: both are probed
    "queue": lambda s: [s["queue_name"], str(s["queue_id"])],
    "retry_policy_id": lambda s: [str(s["policy_id"])],
    "depends_on": lambda s: [[s["job_id"]]],
    "ids": lambda s: [[str(s["dead_letter_id"])]],
}
#: Routes whose body field of that name names another kind of resource.
ROUTE_BODY_REFERENCES: dict[tuple[str, str], dict[str, Callable[[dict[str, Any]], list[Any]]]] = {
    ("POST", "/projects/{project_id}/jobs/bulk-actions"): {"ids": lambda s: [[s["job_id"]]]},
}


def body_reference(route: Route, name: str) -> Callable[[dict[str, Any]], list[Any]]:
    return ROUTE_BODY_REFERENCES.get((route.method, route.path), {}).get(
        name, BODY_REFERENCES[name]
    )


#: Body fields that look like references but are not (a client-chosen label).
NOT_REFERENCES = frozenset({"batch_id"})
#: Fields of one body of which exactly one may be given.
_EXCLUSIVE = (frozenset({"ids", "queue"}), frozenset({"ids", "filter"}))


@dataclass(frozen=True)
class Probe:
    route: Route
    #: ("path", param) or ("body", field path, e.g. ("jobs", 0, "queue"))
    where: tuple[Any, ...]
    variant: int = 0  # which of BODY_REFERENCES' values

    def __str__(self) -> str:
        spot = self.where[1] if self.where[0] == "path" else ".".join(map(str, self.where[1:]))
        return f"{self.route.method} {self.route.path} [{self.where[0]} {spot} #{self.variant}]"


def body_model(route: Route) -> type[BaseModel] | None:
    """The request body's model, read from the handler's signature (FastAPI does the same).
    A GET has none (a model there is its query parameters, through a dependency)."""
    if route.method == "GET":
        return None
    hints = typing.get_type_hints(route.handler)
    for name in inspect.signature(route.handler).parameters:
        kind = hints.get(name)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            return kind
    return None


def reference_fields(model: type[BaseModel], prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every field of `model` (and of list items) that names a resource."""
    found: list[tuple[Any, ...]] = []
    for name, field in model.model_fields.items():
        if name in BODY_REFERENCES:
            found.append((*prefix, name))
            continue
        many = typing.get_origin(field.annotation) is list
        for arg in typing.get_args(field.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                # A list of models (jobs[0].queue) or one optional model (filter.queue).
                found.extend(reference_fields(arg, (*prefix, name, 0) if many else (*prefix, name)))
    return found


def unclassified_fields(model: type[BaseModel]) -> list[str]:
    """Fields that look like references (`*_id`, `*_ids`) but are in neither table above."""
    odd = []
    for name, field in model.model_fields.items():
        looks = name.endswith(("_id", "_ids"))
        if looks and name not in BODY_REFERENCES and name not in NOT_REFERENCES:
            odd.append(name)
        for arg in typing.get_args(field.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                odd.extend(f"{name}[].{sub}" for sub in unclassified_fields(arg))
    return odd


def reference_probes(routes: Sequence[Route]) -> list[Probe]:
    probes: list[Probe] = []
    for route in routes:
        if route.scope not in (Scope.PROJECT, Scope.ORG) or not route.min_role:
            continue
        for param in _PARAM.findall(route.path):
            if param != "project_id":
                probes.append(Probe(route, ("path", param)))
        model = body_model(route)
        if model is not None:
            for field_path in reference_fields(model):
                values = body_reference(route, field_path[-1])
                count = len(values(_SHAPE))
                probes.extend(Probe(route, ("body", *field_path), i) for i in range(count))
    return probes


#: A stand-in seed, only to count how many values each body reference has.
_SHAPE: dict[str, Any] = {
    "queue_name": "q",
    "queue_id": uuid.UUID(int=0),
    "policy_id": uuid.UUID(int=0),
    "job_id": 1,
    "dead_letter_id": uuid.UUID(int=0),
}


def _set(body: Any, path: tuple[Any, ...], value: Any) -> None:
    target = body
    for step in path[:-1]:
        if isinstance(target, dict) and step not in target:
            target[step] = [{}] if isinstance(path[path.index(step) + 1], int) else {}
        target = target[step]
    target[path[-1]] = value
    # Giving one of an exclusive pair drops the other, at whatever level the field sits.
    level = body
    for step in path:
        if isinstance(level, dict) and isinstance(step, str):
            for group in _EXCLUSIVE:
                if step in group:
                    for other in group - {step}:
                        level.pop(other, None)
        level = level[step]


def _request(probe: Probe, mine: dict[str, Any], theirs: dict[str, Any]) -> tuple[str, Any]:
    """The probe's path and body: everything mine, except the one reference it probes."""
    values = dict(mine)
    if probe.where[0] == "path":
        values[probe.where[1]] = theirs[probe.where[1]]
    path = fill_path(probe.route, values)
    body = copy.deepcopy(body_for(probe.route, mine))
    if probe.where[0] == "body":
        reference = body_reference(probe.route, probe.where[-1])
        _set(body, probe.where[1:], reference(theirs)[probe.variant])
    return path, body


@dataclass(frozen=True)
class ReferenceFailure:
    probe: Probe
    status: int
    code: str | None
    changed: bool
    control_status: int | None = None

    def __str__(self) -> str:
        change = ", changed rows" if self.changed else ""
        control = (
            f" (and with its own id it answered {self.control_status})"
            if self.control_status is not None
            else ""
        )
        return f"{self.probe}: answered {self.status} {self.code}{change}{control}"


async def settle_bulk_actions(conn: asyncpg.Connection[Any]) -> None:
    """Wait until no bulk action a control call created is still running in the background:
    it would change rows while a later probe compares its snapshots."""

    async def settled() -> bool:
        open_ = await conn.fetchval(
            "SELECT count(*) FROM bulk_actions WHERE status IN ('pending', 'running')"
        )
        return open_ == 0

    await wait_for(settled, what="bulk actions to finish")


async def foreign_reference_failures(
    client: httpx.AsyncClient,
    conn: asyncpg.Connection[Any],
    probes: Sequence[Probe],
    *,
    project_id: uuid.UUID,
    other_project_id: uuid.UUID,
    headers: dict[str, str],
    own_values: dict[str, Any],
    foreign_values: dict[str, Any],
    controls: bool = True,
) -> list[ReferenceFailure]:
    """Each probe that did not refuse a foreign reference (404 with the resource's code for a
    path id; 404 or 422 for a body reference) or that changed a row. With `controls`, each body
    probe is also made with the caller's own resource and must succeed: the refusal is then due
    to the reference, not to some other fault of the request."""
    failures: list[ReferenceFailure] = []
    # Deletes last: in the break-it run a delete that got through must not remove what a
    # later probe needs (the other organisation's member is one fixed person).
    for probe in sorted(probes, key=lambda p: (p.route.method == "DELETE", str(p))):
        mine = {**await seed(conn, project_id), **own_values}
        theirs = {**await seed(conn, other_project_id), **foreign_values}
        path, body = _request(probe, mine, theirs)
        before = await snapshot(conn)
        r = await _call(client, probe.route, path, headers, body)
        changed = await snapshot(conn) != before
        code = r.json()["error"]["code"] if r.status_code >= 400 else None
        if probe.where[0] == "path":
            ok = r.status_code == 404 and code == PATH_REFERENCES[probe.where[1]]
        else:
            ok = r.status_code in (404, 422)
        if not ok or changed:
            failures.append(ReferenceFailure(probe, r.status_code, code, changed))
            continue
        if controls and probe.where[0] == "body":
            own_path, own_body = _request(probe, mine, mine)
            control = await _call(client, probe.route, own_path, headers, own_body)
            await settle_bulk_actions(conn)
            if not control.is_success:
                failures.append(
                    ReferenceFailure(probe, r.status_code, code, changed, control.status_code)
                )
    return failures
