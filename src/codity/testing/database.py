"""A migrated throwaway database for an application's tests, and its queues."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from codity.db.dsn import plain_dsn
from codity.tasks import App

#: Where queues go when the App names no project: one organisation and project per database.
DEFAULT_PROJECT = "testing/testing"


@dataclass
class TestDatabase:
    """What the `codity_database` fixture gives: `url` of a fresh database migrated to head."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    url: str

    async def connect(self) -> asyncpg.Connection[Any]:
        conn: asyncpg.Connection[Any] = await asyncpg.connect(plain_dsn(self.url))
        return conn

    async def setup(self, app: App) -> None:
        """Point `app` at this database and create the queues its tasks use, in the App's
        project ("org/project"; the App's project when it is spelled that way, else
        `testing/testing`)."""
        app._database_url = self.url
        org_slug, project_slug = _slugs(app.project)
        conn = await self.connect()
        try:
            async with conn.transaction():
                org = await conn.fetchval(
                    "INSERT INTO organizations (name, slug) VALUES ($1, $1) "
                    "ON CONFLICT (slug) DO UPDATE SET name = EXCLUDED.name RETURNING id",
                    org_slug,
                )
                project = await conn.fetchval(
                    "INSERT INTO projects (org_id, name, slug) VALUES ($1, $2, $2) "
                    "ON CONFLICT (org_id, slug) DO UPDATE SET name = EXCLUDED.name RETURNING id",
                    org,
                    project_slug,
                )
                for queue in sorted({task.queue for task in app.tasks.values()}):
                    await conn.execute(
                        "INSERT INTO queues (project_id, name) VALUES ($1, $2) "
                        "ON CONFLICT DO NOTHING",
                        project,
                        queue,
                    )
        finally:
            await conn.close()

    async def job_counts(self) -> dict[str, int]:
        """Jobs by status, for assertions."""
        conn = await self.connect()
        try:
            rows = await conn.fetch("SELECT status::text, count(*) FROM jobs GROUP BY 1")
            return {r["status"]: r["count"] for r in rows}
        finally:
            await conn.close()


def _slugs(project: str | None) -> tuple[str, str]:
    if project and "/" in project:
        org, _, name = project.partition("/")
        return org, name
    if project:
        try:
            uuid.UUID(project)
        except ValueError:
            return "testing", project
    return tuple(DEFAULT_PROJECT.split("/", 1))  # type: ignore[return-value]
