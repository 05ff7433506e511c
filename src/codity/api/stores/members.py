"""Memberships (who belongs to which organisation, in which role) and invitations.
SQL: `db/sql/api_members.sql`."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import asyncpg

from codity.api.schemas.tenancy import InvitationPublic, MemberPublic
from codity.core import Conn
from codity.db.queries import Fragments, bind
from codity.domain.errors import (
    AlreadyMemberError,
    InvitationNotFoundError,
    MemberNotFoundError,
)
from codity.domain.states import MemberRole


async def role_of(
    conn: Conn, org_id: UUID, user_id: UUID
) -> tuple[MemberRole, datetime | None] | None:
    """The person's role in the organisation now and the instant before which their access
    tokens are refused; None when not a member (or the account is inactive)."""
    row = await bind("api_members_role", org_id=org_id, user_id=user_id).fetchrow(conn)
    return None if row is None else (MemberRole(row["role"]), row["sessions_valid_after"])


async def list_members(
    conn: Conn, org_id: UUID, *, limit: int, after_email: str | None
) -> list[MemberPublic]:
    where = Fragments()
    if after_email is not None:
        where.add("api_members_after", after_email=after_email)
    rows = await where.bind("api_members_list", org_id=org_id, limit=limit).fetch(conn)
    return [MemberPublic(**dict(r)) for r in rows]


async def get_member(conn: Conn, org_id: UUID, user_id: UUID) -> MemberPublic:
    row = await bind("api_members_get", org_id=org_id, user_id=user_id).fetchrow(conn)
    if row is None:
        raise MemberNotFoundError("member not found")
    return MemberPublic(**dict(row))


async def add_member(conn: Conn, org_id: UUID, user_id: UUID, role: MemberRole) -> None:
    try:
        await bind("api_members_insert", org_id=org_id, user_id=user_id, role=role.value).execute(
            conn
        )
    except asyncpg.UniqueViolationError:
        raise AlreadyMemberError("this person is already a member") from None


async def first_membership(conn: Conn, user_id: UUID) -> tuple[UUID, MemberRole] | None:
    """The organisation a sign-in starts in (the oldest membership) and the role there."""
    row = await bind("api_members_first", user_id=user_id).fetchrow(conn)
    return None if row is None else (row["org_id"], MemberRole(row["role"]))


async def membership(conn: Conn, org_id: UUID, user_id: UUID) -> tuple[UUID, MemberRole] | None:
    row = await bind("api_members_of_org", org_id=org_id, user_id=user_id).fetchrow(conn)
    return None if row is None else (row["org_id"], MemberRole(row["role"]))


async def orgs_of_user(conn: Conn, user_id: UUID) -> list[asyncpg.Record]:
    """id, name, slug and role of each organisation the person belongs to, oldest first."""
    rows: list[asyncpg.Record] = await bind("api_members_orgs_of_user", user_id=user_id).fetch(conn)
    return rows


async def lock_for_change(conn: Conn, org_id: UUID, user_id: UUID) -> tuple[MemberRole, int]:
    """The member's current role and how many owners the organisation has, both locked until
    the caller's transaction ends (so two owners demoting each other cannot both succeed)."""
    owners = await bind("api_members_lock_owners", org_id=org_id).fetch(conn)
    current = await bind("api_members_lock", org_id=org_id, user_id=user_id).fetchval(conn)
    if current is None:
        raise MemberNotFoundError("member not found")
    return MemberRole(current), len(owners)


async def set_role(conn: Conn, org_id: UUID, user_id: UUID, role: MemberRole) -> None:
    await bind("api_members_set_role", org_id=org_id, user_id=user_id, role=role.value).execute(
        conn
    )


async def remove(conn: Conn, org_id: UUID, user_id: UUID) -> None:
    await bind("api_members_delete", org_id=org_id, user_id=user_id).execute(conn)


async def invite(
    conn: Conn,
    org_id: UUID,
    *,
    email: str,
    role: MemberRole,
    invited_by: UUID | None,
    token_hash: bytes,
    ttl_days: int,
) -> InvitationPublic:
    row = await bind(
        "api_invitations_upsert",
        org_id=org_id,
        email=email,
        role=role.value,
        invited_by=invited_by,
        token_hash=token_hash,
        ttl_days=ttl_days,
    ).fetchrow(conn)
    return InvitationPublic(**dict(row))


async def list_invitations(
    conn: Conn, org_id: UUID, *, limit: int, after: tuple[datetime, UUID] | None
) -> list[InvitationPublic]:
    where = Fragments()
    if after is not None:
        where.add("api_invitations_after", after_created_at=after[0], after_id=after[1])
    rows = await where.bind("api_invitations_list", org_id=org_id, limit=limit).fetch(conn)
    return [InvitationPublic(**dict(r)) for r in rows]


async def revoke_invitation(conn: Conn, org_id: UUID, invitation_id: UUID) -> None:
    revoked = await bind(
        "api_invitations_revoke", org_id=org_id, invitation_id=invitation_id
    ).fetchval(conn)
    if revoked is None:
        raise InvitationNotFoundError("no open invitation with this id in the organisation")


async def accept_invitation(
    conn: Conn, token_hash: bytes, user_id: UUID
) -> tuple[UUID, MemberRole] | None:
    """The organisation and role of the invitation, now used; None when the token is unknown,
    used, revoked, expired or for another (or an unverified) email."""
    row = await bind("api_invitations_accept", token_hash=token_hash, user_id=user_id).fetchrow(
        conn
    )
    return None if row is None else (row["org_id"], MemberRole(row["role"]))
