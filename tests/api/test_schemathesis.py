"""Property-based contract test: schemathesis against the live app (ASGI, in-process) with a
real database behind it, authenticated as the owner of a seeded organisation.

Every operation of the OpenAPI document gets a bounded number of generated requests, valid
(positive) and deliberately invalid (negative). Checks: no 5xx, and every response conforms to
the schema documented for its status (errors included: they are documented with the envelope).
Path ids point at real seeded rows, so handlers run past the 404 and into their logic;
deleting operations get rows of their own so they do not remove what the others use.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi as schemathesis_asgi
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance
from tests.api.project_api import api_settings, module_database
from tests.factories import (
    make_dead_letter,
    make_job,
    make_membership,
    make_project,
    make_queue,
    make_retry_policy,
    make_schedule,
    make_tenant,
    make_user,
)

from codity.api.app import create_app
from codity.api.tokens import issue_access_token
from codity.db.pool import connect
from codity.domain.states import MemberRole

#: Generated requests per operation and generation mode: bounded so the run stays well under 90 s.
EXAMPLES_PER_OPERATION = 5
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


@dataclass(frozen=True)
class Seeded:
    database_url: str
    token: str
    ids: dict[str, str]  # path parameter -> a real id of the seeded project
    doomed: dict[str, str]  # path parameter -> a real id that DELETE operations may remove


async def _seed(conn: asyncpg.Connection[Any], database_url: str) -> Seeded:
    tenant = await make_tenant(conn)
    user_id = await make_user(conn, "owner@example.test", password_hash="x")
    await make_membership(conn, tenant.org_id, user_id, "owner")

    async def queue(name: str) -> uuid.UUID:
        return await make_queue(conn, tenant.project_id, name=name)

    async def rows(queue_id: uuid.UUID, suffix: str) -> dict[str, str]:
        job = await make_job(conn, queue_id)
        schedule = await make_schedule(
            conn, queue_id, name=f"s-{suffix}", cron="*/5 * * * *", handler="h",
            next_run_at=datetime.now(UTC) + timedelta(minutes=5),
        )  # fmt: skip
        dead = await make_dead_letter(conn, queue_id, handler="h", payload={"a": 1})
        policy = await make_retry_policy(
            conn, tenant.project_id, base_delay_ms=100, max_delay_ms=1000, max_attempts=3
        )
        return {
            "job_id": str(job),
            "schedule_id": str(schedule),
            "dead_letter_id": str(dead),
            "policy_id": str(policy),
        }

    main_queue = await queue("main")
    doomed_queue = await queue("doomed")
    spare_project = await make_project(conn, tenant.org_id, "spare")
    settings_ = api_settings(database_url)
    token = issue_access_token(
        settings_, user_id=user_id, org_id=tenant.org_id, role=MemberRole.OWNER
    )
    return (
        Seeded(
            database_url=database_url,
            token=token,
            ids={
                "project_id": str(tenant.project_id),
                "queue_id": str(main_queue),
                **await rows(main_queue, "main"),
            },
            doomed={
                "project_id": str(tenant.project_id),
                "queue_id": str(doomed_queue),
                **await rows(doomed_queue, "doomed"),
            },
        )
        if spare_project
        else pytest.fail("seeding failed")
    )


@pytest.fixture(scope="module")
async def seeded(pg_server_url: str, template_database: str) -> AsyncIterator[Seeded]:
    async with module_database(pg_server_url, template_database) as url:
        conn = await connect(url)
        try:
            yield await _seed(conn, url)
        finally:
            await conn.close()
            schemathesis_asgi.shutdown_lifespans()  # closes the app's pool before the drop


def _path_parameters(operation: Any, seeded: Seeded) -> dict[str, str]:
    wanted = {p.name for p in operation.path_parameters}
    source = seeded.doomed if operation.method.upper() == "DELETE" else seeded.ids
    if operation.method.upper() == "DELETE" and operation.path == "/api/v1/projects/{project_id}":
        return {}  # deleting the project under test would turn every later request into a 404
    return {name: source[name] for name in wanted if name in source}


def _from_loopback(app: Any) -> Any:
    """Starlette's test client reports its address as the host name "testclient", which no real
    server hands an app (and which audit rows, typed INET, refuse); present it as loopback."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope = {**scope, "client": ("127.0.0.1", 50000)}
        await app(scope, receive, send)

    return wrapped


@pytest.mark.slow
def test_every_operation_honours_its_contract(seeded: Seeded) -> None:
    app = _from_loopback(create_app(api_settings(seeded.database_url)))
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)
    headers = {"Authorization": f"Bearer {seeded.token}"}
    failures: list[str] = []
    succeeded: set[str] = set()
    operations = 0
    # "Sign out everywhere" and a password change end the session every other call uses: last.
    ending = ("/api/v1/auth/logout-all", "/api/v1/auth/password")
    ordered = sorted(
        (result.ok() for result in schema.get_all_operations()), key=lambda o: o.path in ending
    )
    for operation in ordered:
        operations += 1
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(
                generation_mode=mode, path_parameters=_path_parameters(operation, seeded)
            )

            @given(case=strategy)
            @settings(
                max_examples=EXAMPLES_PER_OPERATION,
                deadline=None,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def exercise(case: schemathesis.Case) -> None:
                response = case.call_and_validate(headers=headers, checks=CHECKS)
                if response.status_code < 300:
                    succeeded.add(f"{case.method.upper()} {operation.path}")

            try:
                exercise()
            except Unsatisfiable:
                pass  # negative mode on an operation with nothing to negate (e.g. /healthz)
            except (
                Exception,
                BaseExceptionGroup,
            ) as exc:  # collect: report every failing operation
                failures.append(
                    f"{operation.method.upper()} {operation.path} [{mode.value}]: {exc}"
                )
    assert operations >= 50, f"only {operations} operations in the OpenAPI document"
    assert not failures, "\n\n".join(failures)
    # The run reached the handlers' logic, not only the 404/422 paths: most operations answered
    # at least one 2xx with the seeded ids (generated bodies rarely satisfy every constraint).
    print(f"{len(succeeded)} of {operations} operations answered 2xx:", sorted(succeeded))
    assert len(succeeded) >= operations // 2, sorted(succeeded)
