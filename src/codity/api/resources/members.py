"""/org/members and /org/invitations: list members, change a role, remove; invite by email,
list and revoke invitations.

Nobody is ever attached to an organisation by email alone: an invitation is a single-use,
expiring link mailed to the address, which the invitee accepts signed in with that address
once it is verified (`POST /auth/invitations/accept`).

Only owners manage members. The last owner can be neither demoted nor removed (409
`last_owner`): the owner rows of the organisation are locked while the change is checked, so
two owners demoting each other at once cannot leave the organisation without one.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import Path, Response

from codity.api import mailer, ratelimit
from codity.api.audit import record_audit
from codity.api.deps import AppSettings, CurrentPrincipal, DbPool
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.routing import Route, Scope
from codity.api.schemas.common import DEFAULT_PAGE_SIZE
from codity.api.schemas.tenancy import (
    InvitationCreate,
    InvitationPublic,
    InvitationsPage,
    MemberPublic,
    MembersPage,
    MemberUpdate,
)
from codity.api.stores import api_keys, orgs
from codity.api.stores import members as store
from codity.api.tokens import new_opaque_token
from codity.core import Conn
from codity.domain.errors import LastOwnerError, RateLimitedError
from codity.domain.states import MemberRole

UserId = Annotated[uuid.UUID, Path(description="the member's user id")]
InvitationId = Annotated[uuid.UUID, Path(description="the invitation's id")]
#: Invitations mail strangers: an organisation (anyone can make one) must not become a relay.
INVITATIONS_PER_DAY = 100


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


async def list_invitations(
    principal: CurrentPrincipal,
    pool: DbPool,
    limit: Limit = DEFAULT_PAGE_SIZE,
    cursor: Cursor = None,
) -> InvitationsPage:
    after = decode_cursor(cursor, datetime, uuid.UUID)
    items = await store.list_invitations(
        pool, principal.org_id, limit=limit, after=(after[0], after[1]) if after else None
    )
    return InvitationsPage(
        items=items, next_cursor=next_cursor(items, limit, lambda i: (i.created_at, i.id))
    )


async def invite(
    body: InvitationCreate, principal: CurrentPrincipal, pool: DbPool, settings: AppSettings
) -> InvitationPublic:
    """A single-use link, valid INVITATION_TTL_DAYS, mailed to the address. Nobody becomes a
    member here: the invitee accepts it signed in with that address, once it is verified."""
    email = str(body.email).lower()
    decision = await ratelimit.consume(
        pool, f"invite:org:{principal.org_id}", cost=1, limit=INVITATIONS_PER_DAY, window_s=86400
    )
    if not decision.allowed:
        raise RateLimitedError(
            f"at most {INVITATIONS_PER_DAY} invitations per day per organisation",
            retry_after_s=decision.retry_after_s,
        )
    token, token_hash = new_opaque_token()
    async with pool.acquire() as conn, conn.transaction():
        invitation = await store.invite(
            conn,
            principal.org_id,
            email=email,
            role=body.role,
            invited_by=principal.user_id,
            token_hash=token_hash,
            ttl_days=settings.invitation_ttl_days,
        )
        await record_audit(
            conn,
            principal,
            "member.invite",
            target_type="invitation",
            target_id=invitation.id,
            details={"role": body.role.value},
        )
        org = await orgs.get_org(conn, principal.org_id)
    await mailer.send(
        settings,
        to=email,
        subject=mailer.INVITE_SUBJECT.format(org=org.name),
        text=mailer.INVITE_TEXT.format(
            inviter=invitation.invited_by_email or "An owner",
            org=org.name,
            role=body.role.value,
            email=email,
            link=mailer.link(settings, "/invitations/accept", token),
            days=settings.invitation_ttl_days,
        ),
        kind="invitation",
    )
    return invitation


async def revoke_invitation(
    invitation_id: InvitationId, principal: CurrentPrincipal, pool: DbPool
) -> Response:
    async with pool.acquire() as conn, conn.transaction():
        await store.revoke_invitation(conn, principal.org_id, invitation_id)
        await record_audit(
            conn, principal, "member.invitation_revoke", target_type="invitation",
            target_id=invitation_id,
        )  # fmt: skip
    return Response(status_code=204)


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
        # Their keys already stopped working with the membership; revoking them makes that
        # visible and keeps them dead if the person is ever invited back.
        await api_keys.revoke_keys_of(conn, principal.org_id, user_id)
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
_ORG = Scope.ORG
ROUTES: list[Route] = [
    Route("GET", "/org/members", list_members, _ORG, MemberRole.VIEWER,
          "Members of the organisation", response_model=MembersPage, tags=_TAGS),
    Route("PATCH", "/org/members/{user_id}", update_member, _ORG, MemberRole.OWNER,
          "Change a member's role", response_model=MemberPublic, tags=_TAGS),
    Route("DELETE", "/org/members/{user_id}", remove_member, _ORG, MemberRole.OWNER,
          "Remove a member (the API keys they created are revoked)", status_code=204,
          tags=_TAGS),
    Route("GET", "/org/invitations", list_invitations, _ORG, MemberRole.OWNER,
          "Open invitations (not accepted, not revoked), newest first",
          response_model=InvitationsPage, tags=_TAGS),
    Route("POST", "/org/invitations", invite, _ORG, MemberRole.OWNER,
          "Invite someone by email: a single-use link that expires is mailed to them",
          response_model=InvitationPublic, status_code=201, tags=_TAGS),
    Route("DELETE", "/org/invitations/{invitation_id}", revoke_invitation, _ORG,
          MemberRole.OWNER, "Revoke an invitation: its link stops working", status_code=204,
          tags=_TAGS),
]  # fmt: skip
