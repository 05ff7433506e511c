"""Shared fixtures for the core engine's integration tests (real PostgreSQL)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest
from tests.factories import make_queue, make_tenant, make_worker, project_of


@pytest.fixture
async def queue_id(db: asyncpg.Connection[Any]) -> uuid.UUID:
    return await make_queue(db)


@pytest.fixture
async def worker_id(db: asyncpg.Connection[Any]) -> uuid.UUID:
    return await make_worker(db)


@pytest.fixture
async def project_id(db: asyncpg.Connection[Any]) -> uuid.UUID:
    return (await make_tenant(db)).project_id


@pytest.fixture
async def queue_project_id(db: asyncpg.Connection[Any], queue_id: uuid.UUID) -> uuid.UUID:
    """The project of `queue_id` (core operations take the project their rows belong to)."""
    return await project_of(db, queue_id)
