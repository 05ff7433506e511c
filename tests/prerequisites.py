"""What a fault suite does when something it needs is missing (the system's pg_ctl for a
cluster it can stop and start, Debian's pgbouncer, the server's contrib modules for
tests/integration/test_payload_index.py and test_lifecycle_trigger.py): on a laptop it skips,
saying what to install; under `CODITY_REQUIRE_FAULT_SUITES=1` (`.ci/run` sets it) it FAILS,
so CI cannot go green with the chaos, restart, outage or PgBouncer suite silently not run. The
browser suite has the same switch of its own (`CODITY_REQUIRE_BROWSER_SUITE`,
tests/e2e/conftest.py)."""

from __future__ import annotations

import os
from typing import Any, NoReturn

import asyncpg
import pytest

ENV = "CODITY_REQUIRE_FAULT_SUITES"


def required() -> bool:
    return os.environ.get(ENV) == "1"


def missing(reason: str) -> NoReturn:
    """Skip the test for `reason`, or fail it when the fault suites are required."""
    if required():
        pytest.fail(f"{reason} [{ENV}=1]", pytrace=False)
    pytest.skip(reason)


async def contrib_extension(db: asyncpg.Connection[Any], name: str) -> None:
    """Create the server's contrib extension `name` in the test's database, or skip (fail under
    CODITY_REQUIRE_FAULT_SUITES=1) when the server has none: the pgserver wheel has no contrib
    modules; the system's server (Debian's postgresql) has."""
    available = await db.fetchval(
        "SELECT count(*) FROM pg_available_extensions WHERE name = $1", name
    )
    if not available:
        missing(f"{name} is not installed (Debian: postgresql's contrib)")
    await db.execute(f'CREATE EXTENSION IF NOT EXISTS "{name}"')
