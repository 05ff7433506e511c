"""Organisations. SQL: `db/sql/api_orgs.sql`. The caller's organisation always comes from the
token, never from a parameter."""

from __future__ import annotations

from uuid import UUID

from codity.api.schemas.auth import OrgRef
from codity.api.schemas.tenancy import OrgPublic
from codity.core import Conn
from codity.db.queries import bind


async def create_org(conn: Conn, *, name: str, slug: str) -> OrgRef:
    return OrgRef(**dict(await bind("api_orgs_insert", name=name, slug=slug).fetchrow(conn)))


async def get_org(conn: Conn, org_id: UUID) -> OrgPublic:
    return OrgPublic(**dict(await bind("api_orgs_get", org_id=org_id).fetchrow(conn)))


async def rename_org(conn: Conn, org_id: UUID, name: str) -> OrgPublic:
    row = await bind("api_orgs_rename", org_id=org_id, name=name).fetchrow(conn)
    return OrgPublic(**dict(row))
