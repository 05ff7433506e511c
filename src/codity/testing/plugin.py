"""codity's pytest plugin (the `pytest11` entry point: loaded wherever codity is installed).

Fixtures, inert until a test asks for one:

- `codity_database`: a fresh database, migrated to head, dropped after the test. The server is
  `CODITY_TEST_DATABASE_URL` (or `TEST_DATABASE_URL`) when set, else a throwaway PostgreSQL
  cluster started once per session (system binaries or the embedded wheel). Each test's
  database is cloned from a migrated template, so it costs a file copy, not a migration.
- `codity_worker`: `await codity_worker.run_until_empty(app)` runs a real worker on that
  database until no job is left to run.

Override `codity_server_url` (session scope) to use a server of your own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import uuid
from collections.abc import Iterator

import asyncpg
import pytest

from codity.db import migrate
from codity.db.dsn import plain_dsn, with_database
from codity.testing.database import TestDatabase
from codity.testing.worker import TestWorker

_names = itertools.count()
_RUN = uuid.uuid4().hex[:8]


def _admin(server_url: str, statement: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(plain_dsn(server_url))
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.fixture(scope="session")
def codity_server_url() -> Iterator[str]:
    """A superuser URL of the PostgreSQL server the codity fixtures create databases on."""
    given = os.environ.get("CODITY_TEST_DATABASE_URL") or os.environ.get("TEST_DATABASE_URL")
    if given:
        yield with_database(given, "postgres")
        return
    from codity.db.cluster import throwaway_cluster

    with throwaway_cluster() as cluster:
        yield cluster.url


@pytest.fixture(scope="session")
def codity_template_database(codity_server_url: str) -> Iterator[str]:
    name = f"codity_app_tpl_{_RUN}"
    _admin(codity_server_url, f'CREATE DATABASE "{name}"')
    migrate.upgrade(with_database(codity_server_url, name))
    yield name
    _admin(codity_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def codity_database(
    codity_server_url: str, codity_template_database: str
) -> Iterator[TestDatabase]:
    name = f"codity_app_{_RUN}_{next(_names)}"
    _admin(codity_server_url, f'CREATE DATABASE "{name}" TEMPLATE "{codity_template_database}"')
    yield TestDatabase(with_database(codity_server_url, name))
    with contextlib.suppress(Exception):
        _admin(codity_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def codity_worker(codity_database: TestDatabase) -> TestWorker:
    return TestWorker(codity_database)
