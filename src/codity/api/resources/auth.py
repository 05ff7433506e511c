"""/auth: register, verify the email, sign in, refresh, sign out (this session or all), change
the password, accept an invitation, me, switch-org.

Identity is verified before it counts: registration creates an account that can neither sign
in nor join an organisation until its owner opens the signed, single-use, expiring link mailed
to the address (`/auth/verify`). Registration answers the same whether or not the address
already had an account; only the mail differs, so it cannot be used to probe for accounts.

Sessions: the refresh token travels only in an httpOnly SameSite=Strict cookie scoped to
/api/v1/auth (`codity.api.cookies`); calls that use it (refresh, logout) must carry the
session's CSRF token in `X-CSRF-Token`. Refresh tokens are opaque, stored as an HMAC under
JWT_REFRESH_SECRET, and grouped in families (one family per sign-in). Every refresh rotates:
presenting a token that was already rotated means it leaked, so the whole family is revoked.
A password change and "sign out everywhere" revoke every family of the account and refuse
every access token issued before them (`users.sessions_valid_after`, checked per request).

The refresh token carries the active organisation in clear (`<org id hex>.<random>`); the whole
string is what is hashed and looked up, so the org part cannot be altered without making the
token unknown.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import secrets
import time
import uuid
from typing import Annotated

from fastapi import Header, Request, Response

from codity.api import cookies, mailer, ratelimit
from codity.api.audit import record_audit
from codity.api.deps import AppSettings, CurrentPrincipal, DbPool
from codity.api.principal import Principal
from codity.api.request_context import current_client_ip
from codity.api.routing import RateLimitClass, Route, Scope
from codity.api.schemas.auth import (
    AccessToken,
    EmailVerified,
    InvitationAccept,
    InvitationAccepted,
    LoginRequest,
    MembershipPublic,
    MePublic,
    OrgRef,
    PasswordChange,
    RegisterRequest,
    ResendVerificationRequest,
    SwitchOrgRequest,
    VerificationSent,
    VerifyEmailRequest,
)
from codity.api.security import from_epoch_ms, require_user
from codity.api.stores import members, orgs, projects, sessions, users
from codity.api.tokens import (
    csrf_matches,
    csrf_token,
    decode_verification_token,
    issue_access_token,
    issue_verification_token,
    refresh_token_hash,
    sha256,
)
from codity.core import Conn
from codity.domain.errors import (
    CsrfError,
    EmailNotVerifiedError,
    EmailTakenError,
    InvalidCredentialsError,
    InvalidInvitationError,
    InvalidRefreshTokenError,
    InvalidVerificationTokenError,
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
#: Mails about one address (verification, "already registered") per hour: registration and
#: resend must not become a way to flood someone's inbox.
MAILS_PER_ADDRESS_PER_HOUR = 5
VERIFICATION_SENT = (
    "If this address can receive mail, a confirmation link is on its way: open it, then sign in."
)

CsrfHeader = Annotated[str | None, Header(alias=cookies.CSRF_HEADER, max_length=200)]


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40].strip("-")
    return slug or "org"


# --- sessions ------------------------------------------------------------------------------


async def _start_session(
    conn: Conn,
    settings: Settings,
    request: Request,
    response: Response,
    *,
    user_id: uuid.UUID,
    org_id: uuid.UUID,
    role: MemberRole,
    family_id: uuid.UUID | None = None,
    issued_at_ms: int | None = None,
) -> AccessToken:
    """A refresh token (cookie) in `family_id` (a new family: a new sign-in) and an access
    token (the answer, for the client's memory)."""
    family = family_id or uuid.uuid4()
    refresh = f"{org_id.hex}.{secrets.token_urlsafe(32)}"
    await sessions.store(
        conn,
        user_id=user_id,
        family_id=family,
        token_hash=refresh_token_hash(settings, refresh),
        ttl_s=settings.refresh_token_ttl_s,
        user_agent=(request.headers.get("user-agent") or "")[:256] or None,
        ip=current_client_ip(),
    )
    csrf = csrf_token(settings, family)
    cookies.set_session(response, request, settings, refresh=refresh, csrf=csrf)
    access = issue_access_token(
        settings, user_id=user_id, org_id=org_id, role=role, issued_at_ms=issued_at_ms
    )
    return AccessToken(access_token=access, expires_in=settings.access_token_ttl_s, csrf_token=csrf)


def _org_of_refresh_token(token: str) -> uuid.UUID | None:
    head, _, _ = token.partition(".")
    try:
        return uuid.UUID(hex=head)
    except ValueError:
        return None


# --- registration and verification -----------------------------------------------------------


async def _may_mail(pool: DbPool, email: str) -> bool:
    decision = await ratelimit.consume(
        pool, f"mail:address:{email}", cost=1, limit=MAILS_PER_ADDRESS_PER_HOUR, window_s=3600
    )
    return decision.allowed


async def _verification_mail(
    conn: Conn, settings: Settings, *, user_id: uuid.UUID, email: str
) -> str:
    """A new single-use verification link for the account (its row written on `conn`)."""
    verification_id = uuid.uuid4()
    await users.new_verification(
        conn,
        verification_id=verification_id,
        user_id=user_id,
        email=email,
        ttl_s=settings.email_verification_ttl_s,
    )
    token = issue_verification_token(
        settings, verification_id=verification_id, user_id=user_id, email=email
    )
    return mailer.link(settings, "/verify-email", token)


async def _send_verification(settings: Settings, email: str, link: str) -> None:
    await mailer.send(
        settings,
        to=email,
        subject=mailer.VERIFY_SUBJECT,
        text=mailer.VERIFY_TEXT.format(
            link=link, hours=max(1, settings.email_verification_ttl_s // 3600)
        ),
        kind="verify",
    )


async def register(
    body: RegisterRequest, response: Response, pool: DbPool, settings: AppSettings
) -> VerificationSent:
    """A new, unverified account with its own organisation and a default project; a
    verification link is mailed. An address that already has an account gets the same answer
    and a different mail ("someone tried to register", with a fresh link if still unverified).
    """
    email = str(body.email).lower()
    # ~50 ms of CPU on both paths, in a thread and before the transaction: the answer takes
    # as long whether or not the address was known.
    password_hash = await asyncio.to_thread(hash_password, body.password)
    link: str | None = None
    existing = None
    async with pool.acquire() as conn, conn.transaction():
        try:
            async with conn.transaction():  # a savepoint: a lost race on the email is not fatal
                user = await users.create_user(
                    conn, email=email, password_hash=password_hash, display_name=body.name
                )
                org = await orgs.create_org(
                    conn,
                    name=body.org_name,
                    slug=f"{slugify(body.org_name)}-{secrets.token_hex(3)}",
                )
                await members.add_member(conn, org.id, user.id, MemberRole.OWNER)
                await projects.create_project(
                    conn, org.id, name=DEFAULT_PROJECT_NAME, slug=DEFAULT_PROJECT_SLUG
                )
                actor = Principal(user.id, None, org.id, MemberRole.OWNER, None)
                await record_audit(
                    conn, actor, "user.register", target_type="user", target_id=user.id
                )
                link = await _verification_mail(conn, settings, user_id=user.id, email=email)
        except EmailTakenError:
            existing = await users.by_email(conn, email)
            if existing is not None and existing.email_verified_at is None:
                link = await _verification_mail(conn, settings, user_id=existing.id, email=email)
    if await _may_mail(pool, email):
        if existing is None and link is not None:
            await _send_verification(settings, email, link)
        else:
            await mailer.send(
                settings,
                to=email,
                subject=mailer.ALREADY_REGISTERED_SUBJECT,
                text=mailer.ALREADY_REGISTERED_TEXT.format(
                    url=settings.public_url,
                    hours=max(1, settings.email_verification_ttl_s // 3600),
                    link=link or "(your address is already confirmed: just sign in)",
                ),
                kind="already_registered",
            )
    response.status_code = 202
    return VerificationSent(message=VERIFICATION_SENT)


async def resend_verification(
    body: ResendVerificationRequest, response: Response, pool: DbPool, settings: AppSettings
) -> VerificationSent:
    """A new link for an unverified account; the same answer for any address."""
    email = str(body.email).lower()
    account = await users.by_email(pool, email)
    if account is not None and account.email_verified_at is None and await _may_mail(pool, email):
        link = await _verification_mail(pool, settings, user_id=account.id, email=email)
        await _send_verification(settings, email, link)
    response.status_code = 202
    return VerificationSent(message=VERIFICATION_SENT)


async def verify_email(
    body: VerifyEmailRequest, pool: DbPool, settings: AppSettings
) -> EmailVerified:
    """The mailed link: signed by us, unexpired, unused, for the account's current email."""
    claims = decode_verification_token(settings, body.token)
    if not await users.use_verification(
        pool,
        verification_id=claims.verification_id,
        user_id=claims.user_id,
        email=claims.email,
    ):
        raise InvalidVerificationTokenError(
            "this verification link was already used or is no longer valid: sign in, or ask "
            "for a new one"
        )
    return EmailVerified(email=claims.email)


# --- sign in, refresh, sign out ----------------------------------------------------------------


async def login(
    body: LoginRequest, request: Request, response: Response, pool: DbPool, settings: AppSettings
) -> AccessToken:
    email = str(body.email).lower()
    ip = current_client_ip()
    # Reserved before the password is checked: parallel guesses cannot overtake the count.
    await ratelimit.reserve_login_attempt(pool, settings, ip=ip, email=email)
    account = await users.by_email(pool, email)
    stored = account.password_hash if account else _DUMMY_HASH
    # argon2 takes ~50 ms of CPU: off the event loop, so other requests keep flowing.
    ok = await asyncio.to_thread(verify_password, stored, body.password)
    if not ok or account is None or not account.is_active:
        raise InvalidCredentialsError("the email or the password is wrong")
    await ratelimit.release_login_attempt(pool, ip=ip, email=email)
    if account.email_verified_at is None:
        # Only someone who knows the password learns this.
        raise EmailNotVerifiedError(
            "confirm your email address first: open the link we mailed you (or ask for a new one)"
        )
    membership = await members.first_membership(pool, account.id)
    if membership is None:
        raise InvalidCredentialsError("this account is not a member of any organisation")
    await users.touch_login(pool, account.id)
    return await _start_session(
        pool,
        settings,
        request,
        response,
        user_id=account.id,
        org_id=membership[0],
        role=membership[1],
    )


async def refresh(
    request: Request,
    response: Response,
    pool: DbPool,
    settings: AppSettings,
    csrf: CsrfHeader = None,
) -> AccessToken:
    """Exchange the refresh cookie for a new one (rotation) and a new access token."""
    token = request.cookies.get(cookies.REFRESH_COOKIE)
    if not token:
        raise InvalidRefreshTokenError("no session: sign in")
    async with pool.acquire() as conn:
        async with conn.transaction():
            row = await sessions.lock(conn, refresh_token_hash(settings, token))
            if row is None or row["revoked_at"] is not None:
                raise InvalidRefreshTokenError("the session is not valid: sign in again")
            # No state change before the CSRF check: another site's page cannot rotate (or
            # revoke, through the reuse rule) a session it cannot read the CSRF token of.
            if not csrf_matches(settings, row["family_id"], csrf):
                raise CsrfError(f"the {cookies.CSRF_HEADER} header is missing or wrong")
            reused = row["rotated_at"] is not None
            if reused or not row["account_ok"]:
                await sessions.revoke_family(conn, row["family_id"])
            elif row["expires_at"] <= dt.datetime.now(dt.UTC):
                raise InvalidRefreshTokenError("the session has expired: sign in again")
            else:
                await sessions.rotate(conn, row["id"])
                org_id = _org_of_refresh_token(token)
                membership = None
                if org_id is not None:
                    membership = await members.membership(conn, org_id, row["user_id"])
                membership = membership or await members.first_membership(conn, row["user_id"])
                if membership is None:
                    raise InvalidRefreshTokenError(
                        "this account is not a member of any organisation"
                    )
                return await _start_session(
                    conn,
                    settings,
                    request,
                    response,
                    user_id=row["user_id"],
                    org_id=membership[0],
                    role=membership[1],
                    family_id=row["family_id"],
                )
        # Outside the transaction so the family's revocation is committed before we answer.
        if not reused:
            raise InvalidRefreshTokenError("this account can no longer sign in")
        raise RefreshTokenReusedError(
            "this session was already refreshed elsewhere: every session of this sign-in is revoked"
        )


async def logout(
    request: Request,
    pool: DbPool,
    settings: AppSettings,
    csrf: CsrfHeader = None,
) -> Response:
    """Revokes the refresh cookie's whole family and clears the cookies. Without a (known)
    session cookie there is nothing to revoke: the cookies are cleared all the same."""
    token = request.cookies.get(cookies.REFRESH_COOKIE)
    if token:
        family = await sessions.family_of(pool, refresh_token_hash(settings, token))
        if family is not None:
            if not csrf_matches(settings, family, csrf):
                raise CsrfError(f"the {cookies.CSRF_HEADER} header is missing or wrong")
            await sessions.revoke_family(pool, family)
    answer = Response(status_code=204)
    cookies.clear_session(answer, request, settings)
    return answer


async def logout_everywhere(
    principal: CurrentPrincipal, request: Request, pool: DbPool, settings: AppSettings
) -> Response:
    """Every session of the account ends: refresh families revoked, access tokens refused."""
    user_id = require_user(principal)
    async with pool.acquire() as conn, conn.transaction():
        await sessions.revoke_all(conn, user_id)
        await users.end_sessions(conn, user_id, from_epoch_ms(time.time_ns() // 1_000_000))
        await record_audit(conn, principal, "user.logout_everywhere", target_type="user",
                           target_id=user_id)  # fmt: skip
    answer = Response(status_code=204)
    cookies.clear_session(answer, request, settings)
    return answer


async def change_password(
    body: PasswordChange,
    principal: CurrentPrincipal,
    request: Request,
    response: Response,
    pool: DbPool,
    settings: AppSettings,
) -> AccessToken:
    """A new password ends every session (this one included) and starts a new one here."""
    user_id = require_user(principal)
    account = await users.get_account(pool, user_id)
    assert account is not None
    ip = current_client_ip()
    await ratelimit.reserve_login_attempt(pool, settings, ip=ip, email=account.email)
    if not await asyncio.to_thread(verify_password, account.password_hash, body.current_password):
        raise InvalidCredentialsError("the current password is wrong")
    await ratelimit.release_login_attempt(pool, ip=ip, email=account.email)
    new_hash = await asyncio.to_thread(hash_password, body.new_password)
    now_ms = time.time_ns() // 1_000_000  # one instant: the cut-off and the new token's iat
    async with pool.acquire() as conn, conn.transaction():
        await users.set_password(conn, user_id, new_hash, from_epoch_ms(now_ms))
        await sessions.revoke_all(conn, user_id)
        await record_audit(
            conn, principal, "user.password_change", target_type="user", target_id=user_id
        )
        return await _start_session(
            conn,
            settings,
            request,
            response,
            user_id=user_id,
            org_id=principal.org_id,
            role=principal.role,
            issued_at_ms=now_ms,
        )


# --- who am I, other organisations, invitations -----------------------------------------------


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
    principal: CurrentPrincipal,
    request: Request,
    response: Response,
    pool: DbPool,
    settings: AppSettings,
) -> AccessToken:
    """A session for another organisation the user belongs to (404 if not a member)."""
    user_id = require_user(principal)
    membership = await members.membership(pool, body.org_id, user_id)
    if membership is None:
        raise OrgNotFoundError("organisation not found")
    return await _start_session(
        pool, settings, request, response, user_id=user_id, org_id=body.org_id, role=membership[1]
    )


async def accept_invitation(
    body: InvitationAccept, principal: CurrentPrincipal, pool: DbPool
) -> InvitationAccepted:
    """The signed-in invitee accepts: the token must be unused, unexpired, not revoked, and for
    this account's own verified email. Then they are a member, in the invitation's role."""
    user_id = require_user(principal)
    async with pool.acquire() as conn, conn.transaction():
        accepted = await members.accept_invitation(conn, sha256(body.token), user_id)
        if accepted is None:
            raise InvalidInvitationError(
                "this invitation is not valid for you: it was used, revoked or has expired, or "
                "it was sent to another (or an unconfirmed) email address"
            )
        org_id, role = accepted
        await members.add_member(conn, org_id, user_id, role)
        joined = Principal(user_id, None, org_id, role, None)
        await record_audit(conn, joined, "member.join", target_type="user", target_id=user_id,
                           details={"role": role.value})  # fmt: skip
        org = await orgs.get_org(conn, org_id)
    return InvitationAccepted(org=OrgRef(id=org.id, name=org.name, slug=org.slug), role=role)


_TAGS = ("auth",)
AUTH, LOGIN = RateLimitClass.AUTH, RateLimitClass.LOGIN
_PUBLIC, _USER = Scope.PUBLIC, Scope.USER

ROUTES: list[Route] = [
    Route("POST", "/auth/register", register, _PUBLIC, None,
          "Create an account (unverified), its organisation and a default project; a "
          "verification link is mailed. The same answer for an address that has an account",
          response_model=VerificationSent, status_code=202, rate_limit=AUTH, tags=_TAGS),
    Route("POST", "/auth/verify", verify_email, _PUBLIC, None,
          "Confirm an email address with the mailed link's token (single use, expires)",
          response_model=EmailVerified, rate_limit=AUTH, tags=_TAGS),
    Route("POST", "/auth/verify/resend", resend_verification, _PUBLIC, None,
          "Mail a new verification link to an unverified account (the same answer for any "
          "address)", response_model=VerificationSent, status_code=202, rate_limit=AUTH,
          tags=_TAGS),
    Route("POST", "/auth/login", login, _PUBLIC, None,
          "Sign in with email and password: the access token in the answer, the refresh token "
          "in an httpOnly cookie", response_model=AccessToken, rate_limit=LOGIN, tags=_TAGS),
    Route("POST", "/auth/refresh", refresh, _PUBLIC, None,
          "Exchange the refresh cookie for new tokens (X-CSRF-Token required; rotation; reuse "
          "revokes the family)", response_model=AccessToken, tags=_TAGS),
    # Not under the per-IP auth ceiling: every page load of the dashboard refreshes (the access
    # token lives in memory), a 256-bit cookie cannot be guessed, and an office behind one NAT
    # address must not run out of page loads.
    Route("POST", "/auth/logout", logout, _PUBLIC, None,
          "Revoke the refresh cookie's family and clear the cookies (X-CSRF-Token required)",
          status_code=204, tags=_TAGS),
    Route("POST", "/auth/logout-all", logout_everywhere, _USER, None,
          "Sign out everywhere: every session of the account ends at once",
          status_code=204, rate_limit=AUTH, tags=_TAGS),
    Route("POST", "/auth/password", change_password, _USER, None,
          "Change the password: every session ends, a new one starts here",
          response_model=AccessToken, rate_limit=LOGIN, tags=_TAGS),
    Route("GET", "/auth/me", me, _USER, None,
          "The signed-in user, their organisations and the active organisation's projects",
          response_model=MePublic, tags=_TAGS),
    Route("POST", "/auth/switch-org", switch_org, _USER, None,
          "A session for another organisation the user belongs to", response_model=AccessToken,
          rate_limit=AUTH, tags=_TAGS),
    Route("POST", "/auth/invitations/accept", accept_invitation, _USER, None,
          "Accept an invitation with the mailed link's token (signed in with the invited, "
          "verified email)", response_model=InvitationAccepted, rate_limit=AUTH, tags=_TAGS),
]  # fmt: skip
