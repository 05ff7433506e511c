"""Test databases: a real PostgreSQL, never a mock.

The server is TEST_DATABASE_URL or DATABASE_URL when set; otherwise the suite starts a
throwaway cluster (system binaries when present, the embedded wheel otherwise). The schema is
migrated once into a template database; every test that asks for `database_url` gets its own
database cloned from that template, so tests are isolated and cheap (a clone is a file copy).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest

from codity.db import migrate
from codity.db.cluster import throwaway_cluster
from codity.db.dsn import plain_dsn, with_database
from codity.db.pool import connect, create_pool

os.environ.setdefault("CODITY_ENV", "test")

_counter = itertools.count()
_RUN_TAG = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """A superuser URL of the server the tests use (its `postgres` database)."""
    given = os.environ.get("TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if given:
        yield with_database(given, "postgres")
        return
    with throwaway_cluster() as cluster:
        yield cluster.url


async def _admin(server_url: str, *statements: str) -> None:
    conn = await asyncpg.connect(plain_dsn(server_url))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
async def template_database(pg_server_url: str) -> AsyncIterator[str]:
    """The name of a database migrated to head, used as the template for every test database."""
    name = f"codity_tpl_{_RUN_TAG}"
    await _admin(pg_server_url, f'CREATE DATABASE "{name}"')
    migrate.upgrade(with_database(pg_server_url, name))
    yield name
    await _admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def database_url(pg_server_url: str, template_database: str) -> AsyncIterator[str]:
    """A fresh, migrated database of this test's own."""
    name = f"codity_t_{_RUN_TAG}_{next(_counter)}"
    await _admin(pg_server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    yield with_database(pg_server_url, name)
    with contextlib.suppress(Exception):
        await _admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def empty_database_url(pg_server_url: str) -> AsyncIterator[str]:
    """A fresh database with no schema at all (for migration tests)."""
    name = f"codity_e_{_RUN_TAG}_{next(_counter)}"
    await _admin(pg_server_url, f'CREATE DATABASE "{name}"')
    yield with_database(pg_server_url, name)
    with contextlib.suppress(Exception):
        await _admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection[Any]]:
    """One connection to this test's database."""
    conn = await connect(database_url)
    yield conn
    await conn.close()


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool[Any]]:
    p = await create_pool(database_url, min_size=1, max_size=20)
    yield p
    await p.close()


@pytest.fixture(scope="session")
def codity_server_url(pg_server_url: str) -> str:
    """codity.testing's fixtures (the pytest plugin) use the suite's own server."""
    return pg_server_url
