"""Liveness and readiness, outside /api/v1 and outside the route table (no auth, no tenant).

- `/healthz`: the process is up and serving.
- `/readyz`: the database answers AND its schema is at the migration head; else 503 envelope.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from codity.api.errors import ErrorEnvelope, error_response
from codity.db.queries import bind

#: Readiness answers within this time or says the database is unavailable.
READY_TIMEOUT_S = 2.0

router = APIRouter(include_in_schema=True, tags=["health"])


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    database: str
    migration: str


@router.get("/healthz", response_model=Health, summary="The process is up")
async def healthz() -> Health:
    return Health(status="ok")


async def _schema_revision(pool: asyncpg.Pool[Any]) -> str | None:
    async with pool.acquire(timeout=READY_TIMEOUT_S) as conn:
        if not await bind("api_health_has_migrations").fetchval(conn):
            return None
        rev: str | None = await bind("api_health_revision").fetchval(conn)
        return rev


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": ErrorEnvelope, "description": "not ready"}},
    summary="The database is reachable and migrated to head",
)
async def readyz(request: Request) -> Readiness | JSONResponse:
    head: str = request.app.state.migration_head
    try:
        revision = await asyncio.wait_for(_schema_revision(request.app.state.pool), READY_TIMEOUT_S)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return error_response(503, "database_unavailable", "the database is not reachable")
    if revision != head:
        return error_response(
            503,
            "migrations_pending",
            "the database schema is not at the latest migration: run `codity db migrate`",
            {"current": revision, "head": head},
        )
    return Readiness(status="ready", database="ok", migration=revision)
