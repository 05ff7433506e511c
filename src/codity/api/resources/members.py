"""/org/members: list, add by email (or invite), change role, remove.

Only owners manage members. The last owner can be neither demoted nor removed (409
`last_owner`): the owner rows of the organisation are locked while the change is checked, so
two owners demoting each other at once cannot leave the organisation without one.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Path, Response

from codity.api.audit import record_audit
from codity.api.deps import CurrentPrincipal, DbPool
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.routing import Route, Scope
from codity.api.schemas.common import DEFAULT_PAGE_SIZE
from codity.api.schemas.tenancy import (
    MemberAdded,
    MemberCreate,
    MemberPublic,
    MembersPage,
    MemberUpdate,
)
from codity.api.stores import members as store
from codity.api.stores import users
from codity.core import Conn
from codity.domain.errors import LastOwnerError
from codity.domain.states import MemberRole

UserId = Annotated[uuid.UUID, Path(description="the member's user id")]


async def list_members(
    principal: CurrentPrincipal,
    pool: DbPool,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> MembersPage:
    after = decode_cursor(cursor, str)
    items = await store.list_members(
        pool, principal.org_id, limit=limit, after_email=after[0] if after else None
    )
    return MembersPage(items=items, next_cursor=next_cursor(items, limit, lambda m: (m.email,)))


async def add_member(body: MemberCreate, principal: CurrentPrincipal, pool: DbPool) -> MemberAdded:
    email = str(body.email).lower()
    async with pool.acquire() as conn, conn.transaction():
        user = await users.credentials(conn, email)
        if user is None:
            invitation = await store.invite(
                conn, principal.org_id, email=email, role=body.role, invited_by=principal.user_id
            )
            await record_audit(
                conn,
                principal,
                "member.invite",
                target_type="invitation",
                target_id=invitation.id,
                details={"role": body.role.value},
            )
            return MemberAdded(status="invited", invitation=invitation)
        await store.add_member(conn, principal.org_id, user["id"], body.role)
        await record_audit(
            conn,
            principal,
            "member.add",
            target_type="user",
            target_id=user["id"],
            details={"role": body.role.value},
        )
        member = await store.get_member(conn, principal.org_id, user["id"])
    return MemberAdded(status="added", member=member)


async def lock_and_check_owners(
    conn: Conn, org_id: uuid.UUID, user_id: uuid.UUID, new_role: MemberRole | None
) -> MemberRole:
    """The member's current role, after refusing a change that would leave no owner."""
    current, owners = await store.lock_for_change(conn, org_id, user_id)
    losing_owner = current is MemberRole.OWNER and new_role is not MemberRole.OWNER
    if losing_owner and owners <= 1:
        raise LastOwnerError("the organisation's last owner cannot be demoted or removed")
    return current


async def update_member(
    user_id: UserId, body: MemberUpdate, principal: CurrentPrincipal, pool: DbPool
) -> MemberPublic:
    async with pool.acquire() as conn, conn.transaction():
        before = await lock_and_check_owners(conn, principal.org_id, user_id, body.role)
        await store.set_role(conn, principal.org_id, user_id, body.role)
        await record_audit(
            conn,
            principal,
            "member.role_change",
            target_type="user",
            target_id=user_id,
            details={"from": before.value, "to": body.role.value},
        )
        return await store.get_member(conn, principal.org_id, user_id)


async def remove_member(user_id: UserId, principal: CurrentPrincipal, pool: DbPool) -> Response:
    async with pool.acquire() as conn, conn.transaction():
        before = await lock_and_check_owners(conn, principal.org_id, user_id, None)
        await store.remove(conn, principal.org_id, user_id)
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
