"""Project API keys: listed without secrets, created (the secret returned once), revoked, and
used to authenticate. SQL: `db/sql/api_api_keys.sql`."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

import asyncpg

from codity.api.schemas.auth import UserRef
from codity.api.schemas.tenancy import ApiKeyPublic
from codity.core import Conn
from codity.db.queries import Fragments, bind
from codity.domain.errors import ApiKeyNotFoundError
from codity.domain.states import MemberRole


@dataclass(frozen=True)
class LiveKey:
    """A key that authenticated: which project and organisation it acts in, with which role."""

    id: UUID
    project_id: UUID
    org_id: UUID
    role: MemberRole


async def use_key(conn: Conn, key_hash: bytes) -> LiveKey | None:
    """The live key with this hash (its use recorded), or None: unknown, revoked or expired."""
    row = await bind("api_api_keys_use", key_hash=key_hash).fetchrow(conn)
    if row is None:
        return None
    return LiveKey(row["id"], row["project_id"], row["org_id"], MemberRole(row["role"]))


def _key(row: asyncpg.Record) -> ApiKeyPublic:
    data = dict(row)
    creator_id = data.pop("creator_id")
    creator = (
        UserRef(id=creator_id, email=data.pop("creator_email"), name=data.pop("creator_name"))
        if creator_id is not None
        else None
    )
    data.pop("creator_email", None)
    data.pop("creator_name", None)
    return ApiKeyPublic(**data, created_by=creator)


async def list_keys(
    conn: Conn, project_id: UUID, *, limit: int, after_id: UUID | None
) -> list[ApiKeyPublic]:
    where = Fragments()
    if after_id is not None:
        where.add("api_api_keys_after", after_id=after_id)
    rows = await where.bind("api_api_keys_list", project_id=project_id, limit=limit).fetch(conn)
    return [_key(r) for r in rows]


async def create_key(
    conn: Conn,
    project_id: UUID,
    *,
    name: str,
    prefix: str,
    key_hash: bytes,
    role: MemberRole,
    created_by: UUID,
    expires_in_days: int,
) -> ApiKeyPublic:
    row = await bind(
        "api_api_keys_insert",
        project_id=project_id,
        name=name,
        prefix=prefix,
        key_hash=key_hash,
        role=role.value,
        created_by=created_by,
        expires_in_days=expires_in_days,
    ).fetchrow(conn)
    return _key(row)


async def revoke_keys_of(conn: Conn, org_id: UUID, user_id: UUID) -> None:
    """The keys `user_id` created in the organisation's projects (they leave it)."""
    await bind("api_api_keys_revoke_of_creator", org_id=org_id, user_id=user_id).execute(conn)


async def revoke_key(conn: Conn, project_id: UUID, key_id: UUID) -> None:
    if (
        await bind("api_api_keys_revoke", project_id=project_id, key_id=key_id).fetchval(conn)
        is None
    ):
        raise ApiKeyNotFoundError("API key not found")
