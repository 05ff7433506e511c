"""/org/members: list, add by email (or invite), change role, remove.

Only owners manage members. The last owner can be neither demoted nor removed (409
`last_owner`): the owner rows of the organisation are locked while the change is checked, so
two owners demoting each other at once cannot leave the organisation without one.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import asyncpg
from fastapi import Path, Response

from codity.api.audit import record_audit
from codity.api.deps import CurrentPrincipal, DbPool
from codity.api.resources._tenancy_common import (
    DEFAULT_LIMIT,
    PageCursor,
    PageLimit,
    decode_cursor,
    encode_cursor,
)
from codity.api.routing import Route, Scope
from codity.api.schemas.tenancy import (
    InvitationPublic,
    MemberAdded,
    MemberCreate,
    MemberPublic,
    MembersPage,
    MemberUpdate,
)
from codity.domain.errors import ConflictError, NotFoundError
from codity.domain.states import MemberRole

UserId = Annotated[uuid.UUID, Path(description="the member's user id")]


class MemberNotFoundError(NotFoundError):
    code = "member_not_found"


class AlreadyMemberError(ConflictError):
    code = "already_member"


class LastOwnerError(ConflictError):
    code = "last_owner"


_MEMBER_SQL = """
SELECT u.id AS user_id, u.email, u.display_name AS name, m.role, m.created_at AS joined_at
  FROM memberships m JOIN users u ON u.id = m.user_id
 WHERE m.org_id = $1 AND m.user_id = $2
"""


async def list_members(
    principal: CurrentPrincipal,
    pool: DbPool,
    limit: PageLimit = DEFAULT_LIMIT,
    cursor: PageCursor = None,
) -> MembersPage:
    rows = await pool.fetch(
        """SELECT u.id AS user_id, u.email, u.display_name AS name, m.role,
                  m.created_at AS joined_at
             FROM memberships m JOIN users u ON u.id = m.user_id
            WHERE m.org_id = $1 AND ($2::text IS NULL OR u.email > $2)
            ORDER BY u.email LIMIT $3""",
        principal.org_id,
        decode_cursor(cursor),
        limit,
    )
    items = [MemberPublic(**dict(r)) for r in rows]
    return MembersPage(
        items=items, next_cursor=encode_cursor(items[-1].email) if len(items) == limit else None
    )


async def add_member(body: MemberCreate, principal: CurrentPrincipal, pool: DbPool) -> MemberAdded:
    email = str(body.email).lower()
    async with pool.acquire() as conn, conn.transaction():
        user_id = await conn.fetchval("SELECT id FROM users WHERE email = $1", email)
        if user_id is None:
            row = await conn.fetchrow(
                """INSERT INTO invitations (org_id, email, role, invited_by) VALUES ($1, $2, $3, $4)
                   ON CONFLICT (org_id, email) DO UPDATE
                      SET role = EXCLUDED.role, invited_by = EXCLUDED.invited_by
                   RETURNING id, email, role, created_at""",
                principal.org_id,
                email,
                body.role.value,
                principal.user_id,
            )
            await record_audit(
                conn,
                principal,
                "member.invite",
                target_type="invitation",
                target_id=row["id"],
                details={"role": body.role.value},
            )
            return MemberAdded(status="invited", invitation=InvitationPublic(**dict(row)))
        try:
            await conn.execute(
                "INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)",
                principal.org_id,
                user_id,
                body.role.value,
            )
        except asyncpg.UniqueViolationError:
            raise AlreadyMemberError("this person is already a member") from None
        await record_audit(
            conn,
            principal,
            "member.add",
            target_type="user",
            target_id=user_id,
            details={"role": body.role.value},
        )
        member = await conn.fetchrow(_MEMBER_SQL, principal.org_id, user_id)
    return MemberAdded(status="added", member=MemberPublic(**dict(member)))


async def _lock_and_check_owners(
    conn: asyncpg.Connection[Any],
    org_id: uuid.UUID,
    user_id: uuid.UUID,
    new_role: MemberRole | None,
) -> MemberRole:
    """The member's current role, after refusing a change that would leave no owner."""
    owners = await conn.fetch(
        "SELECT user_id FROM memberships WHERE org_id = $1 AND role = 'owner' FOR UPDATE", org_id
    )
    current = await conn.fetchval(
        "SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2 FOR UPDATE",
        org_id,
        user_id,
    )
    if current is None:
        raise MemberNotFoundError("member not found")
    losing_owner = current == MemberRole.OWNER.value and new_role is not MemberRole.OWNER
    if losing_owner and len(owners) <= 1:
        raise LastOwnerError("the organisation's last owner cannot be demoted or removed")
    return MemberRole(current)


async def update_member(
    user_id: UserId, body: MemberUpdate, principal: CurrentPrincipal, pool: DbPool
) -> MemberPublic:
    async with pool.acquire() as conn, conn.transaction():
        before = await _lock_and_check_owners(conn, principal.org_id, user_id, body.role)
        await conn.execute(
            "UPDATE memberships SET role = $3 WHERE org_id = $1 AND user_id = $2",
            principal.org_id,
            user_id,
            body.role.value,
        )
        await record_audit(
            conn,
            principal,
            "member.role_change",
            target_type="user",
            target_id=user_id,
            details={"from": before.value, "to": body.role.value},
        )
        row = await conn.fetchrow(_MEMBER_SQL, principal.org_id, user_id)
    return MemberPublic(**dict(row))


async def remove_member(user_id: UserId, principal: CurrentPrincipal, pool: DbPool) -> Response:
    async with pool.acquire() as conn, conn.transaction():
        before = await _lock_and_check_owners(conn, principal.org_id, user_id, None)
        await conn.execute(
            "DELETE FROM memberships WHERE org_id = $1 AND user_id = $2", principal.org_id, user_id
        )
        await record_audit(
            conn,
            principal,
            "member.remove",
            target_type="user",
            target_id=user_id,
            details={"role": before.value},
        )
    return Response(status_code=204)


_TAGS = ("members",)
ROUTES: list[Route] = [
    Route("GET", "/org/members", list_members, Scope.ORG, MemberRole.VIEWER,
          "Members of the organisation", response_model=MembersPage, tags=_TAGS),
    Route("POST", "/org/members", add_member, Scope.ORG, MemberRole.OWNER,
          "Add a member by email (an unknown email gets an invitation)",
          response_model=MemberAdded, status_code=201, tags=_TAGS),
    Route("PATCH", "/org/members/{user_id}", update_member, Scope.ORG, MemberRole.OWNER,
          "Change a member's role", response_model=MemberPublic, tags=_TAGS),
    Route("DELETE", "/org/members/{user_id}", remove_member, Scope.ORG, MemberRole.OWNER,
          "Remove a member", status_code=204, tags=_TAGS),
]  # fmt: skip
