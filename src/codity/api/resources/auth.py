"""/auth: register, login, refresh, logout, me, switch-org.

Refresh tokens are opaque, stored as SHA-256, and grouped in families (one family per sign-in).
Every refresh rotates: the presented row gets `rotated_at`, a new row joins the family.
Presenting a token that was already rotated means it leaked (the legitimate client already
exchanged it), so the whole family is revoked: the thief's and the victim's newest token stop
working together, and the user signs in again.

The refresh token carries the active organisation in clear (`<org id hex>.<random>`); the whole
string is what is hashed and looked up, so the org part cannot be altered without making the
token unknown.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import secrets
import uuid

from fastapi import Request, Response

from codity.api import ratelimit
from codity.api.audit import record_audit
from codity.api.deps import AppSettings, CurrentPrincipal, DbPool
from codity.api.principal import Principal
from codity.api.request_context import current_client_ip
from codity.api.routing import RateLimitClass, Route, Scope
from codity.api.schemas.auth import (
    LoginRequest,
    MembershipPublic,
    MePublic,
    OrgRef,
    ProjectRef,
    RefreshRequest,
    RegisterPublic,
    RegisterRequest,
    SwitchOrgRequest,
    TokenPair,
)
from codity.api.security import require_user
from codity.api.stores import members, orgs, projects, sessions, users
from codity.api.tokens import issue_access_token, sha256
from codity.core import Conn
from codity.domain.errors import (
    InvalidCredentialsError,
    InvalidRefreshTokenError,
    OrgNotFoundError,
    RefreshTokenReusedError,
)
from codity.domain.passwords import hash_password, verify_password
from codity.domain.states import MemberRole
from codity.settings import Settings

#: Verified against when the email is unknown, so a miss costs the same time as a wrong password
#: and response timing does not reveal which emails have accounts.
_DUMMY_HASH = hash_password(secrets.token_urlsafe(16))

DEFAULT_PROJECT_NAME = "Default"
DEFAULT_PROJECT_SLUG = "default"


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40].strip("-")
    return slug or "org"


# --- token issuance -----------------------------------------------------------------------


async def _issue_tokens(
    conn: Conn,
    settings: Settings,
    *,
    user_id: uuid.UUID,
    org_id: uuid.UUID,
    role: MemberRole,
    family_id: uuid.UUID | None = None,
    user_agent: str | None = None,
) -> TokenPair:
    refresh = f"{org_id.hex}.{secrets.token_urlsafe(32)}"
    await sessions.store(
        conn,
        user_id=user_id,
        family_id=family_id or uuid.uuid4(),
        token_hash=sha256(refresh),
        ttl_s=settings.refresh_token_ttl_s,
        user_agent=(user_agent or "")[:256] or None,
        ip=current_client_ip(),
    )
    access = issue_access_token(settings, user_id=user_id, org_id=org_id, role=role)
    return TokenPair(
        access_token=access, refresh_token=refresh, expires_in=settings.access_token_ttl_s
    )


# --- handlers -----------------------------------------------------------------------------


async def register(
    body: RegisterRequest, request: Request, pool: DbPool, settings: AppSettings
) -> RegisterPublic:
    """A new user, their organisation (they own it) and a default project, in one transaction."""
    email = str(body.email).lower()
    # ~50 ms of CPU: in a thread, and before the transaction so no connection waits on it.
    password_hash = await asyncio.to_thread(hash_password, body.password)
    async with pool.acquire() as conn, conn.transaction():
        user = await users.create_user(
            conn, email=email, password_hash=password_hash, display_name=body.name
        )
        org = await orgs.create_org(
            conn, name=body.org_name, slug=f"{slugify(body.org_name)}-{secrets.token_hex(3)}"
        )
        await members.add_member(conn, org.id, user.id, MemberRole.OWNER)
        project = await projects.create_project(
            conn, org.id, name=DEFAULT_PROJECT_NAME, slug=DEFAULT_PROJECT_SLUG
        )
        # Pending invitations to this email become memberships now.
        await members.accept_invitations(conn, email, user.id)
        actor = Principal(user.id, None, org.id, MemberRole.OWNER, None)
        await record_audit(conn, actor, "user.register", target_type="user", target_id=user.id)
        tokens = await _issue_tokens(
            conn,
            settings,
            user_id=user.id,
            org_id=org.id,
            role=MemberRole.OWNER,
            user_agent=request.headers.get("user-agent"),
        )
    return RegisterPublic(
        user=user,
        org=org,
        project=ProjectRef(id=project.id, name=project.name, slug=project.slug),
        tokens=tokens,
    )


async def login(
    body: LoginRequest, request: Request, pool: DbPool, settings: AppSettings
) -> TokenPair:
    email = str(body.email).lower()
    ip = current_client_ip()
    # Reserved before the password is checked: once the limit is reached even a correct
    # password waits, and parallel guesses cannot overtake the count.
    await ratelimit.reserve_login_attempt(pool, settings, ip=ip, email=email)
    user = await users.credentials(pool, email)
    stored = user["password_hash"] if user else _DUMMY_HASH
    # argon2 takes ~50 ms of CPU: off the event loop, so other requests keep flowing.
    ok = await asyncio.to_thread(verify_password, stored, body.password)
    if not ok or user is None or not user["is_active"]:
        raise InvalidCredentialsError("the email or the password is wrong")
    await ratelimit.release_login_attempt(pool, ip=ip, email=email)
    membership = await members.first_membership(pool, user["id"])
    if membership is None:
        raise InvalidCredentialsError("this account is not a member of any organisation")
    await users.touch_login(pool, user["id"])
    return await _issue_tokens(
        pool,
        settings,
        user_id=user["id"],
        org_id=membership[0],
        role=membership[1],
        user_agent=request.headers.get("user-agent"),
    )


def _org_of_refresh_token(token: str) -> uuid.UUID | None:
    head, _, _ = token.partition(".")
    try:
        return uuid.UUID(hex=head)
    except ValueError:
        return None


async def refresh(
    body: RefreshRequest, request: Request, pool: DbPool, settings: AppSettings
) -> TokenPair:
    async with pool.acquire() as conn:
        async with conn.transaction():
            row = await sessions.lock(conn, sha256(body.refresh_token))
            if row is None or row["revoked_at"] is not None:
                raise InvalidRefreshTokenError("the refresh token is not valid: sign in again")
            reused = row["rotated_at"] is not None
            if reused:
                await sessions.revoke_family(conn, row["family_id"])
            elif row["expires_at"] <= dt.datetime.now(dt.UTC):
                raise InvalidRefreshTokenError("the refresh token has expired: sign in again")
            else:
                await sessions.rotate(conn, row["id"])
                org_id = _org_of_refresh_token(body.refresh_token)
                membership = None
                if org_id is not None:
                    membership = await members.membership(conn, org_id, row["user_id"])
                membership = membership or await members.first_membership(conn, row["user_id"])
                if membership is None:
                    raise InvalidRefreshTokenError(
                        "this account is not a member of any organisation"
                    )
                return await _issue_tokens(
                    conn,
                    settings,
                    user_id=row["user_id"],
                    org_id=membership[0],
                    role=membership[1],
                    family_id=row["family_id"],
                    user_agent=request.headers.get("user-agent"),
                )
        # Outside the transaction so the family's revocation is committed before we answer.
        raise RefreshTokenReusedError(
            "this refresh token was already used: every session of this sign-in is revoked"
        )


async def logout(body: RefreshRequest, pool: DbPool) -> Response:
    """Revokes the presented token's whole family. Unknown tokens are accepted silently."""
    await sessions.revoke_family_of(pool, sha256(body.refresh_token))
    return Response(status_code=204)


async def me(principal: CurrentPrincipal, pool: DbPool) -> MePublic:
    user_id = require_user(principal)
    user = await users.get_user(pool, user_id)
    memberships = await members.orgs_of_user(pool, user_id)
    active = next(m for m in memberships if m["id"] == principal.org_id)
    return MePublic(
        user=user,
        org=OrgRef(id=active["id"], name=active["name"], slug=active["slug"]),
        role=principal.role,
        memberships=[
            MembershipPublic(
                org=OrgRef(id=m["id"], name=m["name"], slug=m["slug"]), role=MemberRole(m["role"])
            )
            for m in memberships
        ],
        projects=await projects.project_refs(pool, principal.org_id),
    )


async def switch_org(
    body: SwitchOrgRequest,
    request: Request,
    principal: CurrentPrincipal,
    pool: DbPool,
    settings: AppSettings,
) -> TokenPair:
    """New tokens for another organisation the user belongs to (404 if not a member)."""
    user_id = require_user(principal)
    membership = await members.membership(pool, body.org_id, user_id)
    if membership is None:
        raise OrgNotFoundError("organisation not found")
    return await _issue_tokens(
        pool,
        settings,
        user_id=user_id,
        org_id=body.org_id,
        role=membership[1],
        user_agent=request.headers.get("user-agent"),
    )


_TAGS = ("auth",)
AUTH, LOGIN = RateLimitClass.AUTH, RateLimitClass.LOGIN

ROUTES: list[Route] = [
    Route(
        "POST",
        "/auth/register",
        register,
        Scope.PUBLIC,
        None,
        "Create an account, its organisation and a default project",
        response_model=RegisterPublic,
        status_code=201,
        rate_limit=AUTH,
        tags=_TAGS,
    ),
    Route(
        "POST",
        "/auth/login",
        login,
        Scope.PUBLIC,
        None,
        "Sign in with email and password",
        response_model=TokenPair,
        rate_limit=LOGIN,
        tags=_TAGS,
    ),
    Route(
        "POST",
        "/auth/refresh",
        refresh,
        Scope.PUBLIC,
        None,
        "Exchange a refresh token for new tokens (rotation; reuse revokes the family)",
        response_model=TokenPair,
        rate_limit=AUTH,
        tags=_TAGS,
    ),
    Route(
        "POST",
        "/auth/logout",
        logout,
        Scope.PUBLIC,
        None,
        "Revoke the refresh token's family",
        status_code=204,
        rate_limit=AUTH,
        tags=_TAGS,
    ),
    Route(
        "GET",
        "/auth/me",
        me,
        Scope.USER,
        None,
        "The signed-in user, their organisations and the active organisation's projects",
        response_model=MePublic,
        tags=_TAGS,
    ),
    Route(
        "POST",
        "/auth/switch-org",
        switch_org,
        Scope.USER,
        None,
        "Tokens for another organisation the user belongs to",
        response_model=TokenPair,
        rate_limit=AUTH,
        tags=_TAGS,
    ),
]
