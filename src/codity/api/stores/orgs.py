"""Organisations. SQL: `db/sql/api_orgs.sql`. The caller's organisation always comes from the
token, never from a parameter."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from codity.api.schemas.auth import OrgRef
from codity.api.schemas.tenancy import OrgPublic
from codity.core import Conn
from codity.db.queries import bind
from codity.domain.errors import QuotaExceededError

#: The setting that caps each kind of resource, named in the refusal.
_CAP_SETTING = {
    "projects": "MAX_PROJECTS_PER_ORG",
    "queues": "MAX_QUEUES_PER_ORG",
    "schedules": "MAX_SCHEDULES_PER_ORG",
}


async def create_org(conn: Conn, *, name: str, slug: str) -> OrgRef:
    return OrgRef(**dict(await bind("api_orgs_insert", name=name, slug=slug).fetchrow(conn)))


async def get_org(conn: Conn, org_id: UUID) -> OrgPublic:
    return OrgPublic(**dict(await bind("api_orgs_get", org_id=org_id).fetchrow(conn)))


async def rename_org(conn: Conn, org_id: UUID, name: str) -> OrgPublic:
    row = await bind("api_orgs_rename", org_id=org_id, name=name).fetchrow(conn)
    return OrgPublic(**dict(row))


async def reserve_slot(
    conn: Conn, org_id: UUID, kind: Literal["projects", "queues", "schedules"], cap: int
) -> None:
    """Refuse (409 quota_exceeded) creating one more `kind` when the organisation has `cap`.
    Call it inside the creating transaction: the organisation's row stays locked until then,
    so concurrent creations are counted one after the other."""
    await bind("api_orgs_lock", org_id=org_id).fetchval(conn)
    count: int = await bind(f"api_orgs_count_{kind}", org_id=org_id).fetchval(conn)
    if count >= cap:
        raise QuotaExceededError(
            f"the organisation has {count} {kind}: at most {cap} ({_CAP_SETTING[kind]})",
            details={"kind": kind, "count": count, "limit": cap},
        )
