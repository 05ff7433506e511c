"""Authentication (bearer token -> `Principal`) and the one tenancy guard.

`assert_project_access` is the only function that decides whether a project is visible to a
caller. `routing.mount_routes` attaches it to every PROJECT-scoped route, so no handler can
forget it. Anything outside the caller's organisation answers 404, never 403: a caller cannot
tell "exists elsewhere" from "does not exist", so ids cannot be probed.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import asyncpg

from codity.api.principal import Principal, ProjectContext, role_at_least
from codity.api.stores import api_keys, members, projects
from codity.api.tokens import decode_access_token, looks_like_api_key, sha256
from codity.domain.errors import (
    ForbiddenError,
    ProjectNotFoundError,
    SessionRevokedError,
    UnauthorizedError,
)
from codity.domain.states import MemberRole
from codity.settings import Settings

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def epoch_ms(moment: dt.datetime) -> int:
    return (moment - _EPOCH) // dt.timedelta(milliseconds=1)


def from_epoch_ms(ms: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(milliseconds=ms)


def bearer_token(authorization: str | None) -> str:
    if not authorization:
        raise UnauthorizedError("authentication required: send Authorization: Bearer <token>")
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise UnauthorizedError("the Authorization header must be: Bearer <token>")
    return token


async def authenticate(
    pool: asyncpg.Pool[Any], settings: Settings, authorization: str | None
) -> Principal:
    token = bearer_token(authorization)
    if looks_like_api_key(token):
        return await _api_key_principal(pool, token)
    claims = decode_access_token(settings, token)
    # The role comes from the membership row, not from the token: a demotion or a removal
    # takes effect on the next request instead of when the 15-minute token expires.
    found = await members.role_of(pool, claims.org_id, claims.user_id)
    if found is None:
        raise UnauthorizedError("this account is no longer a member of the organisation")
    role, valid_after = found
    # A password change or "sign out everywhere" ends the tokens issued before it, now, not
    # when they expire (milliseconds on both sides, integers: no rounding at the boundary).
    if valid_after is not None and claims.issued_at_ms < epoch_ms(valid_after):
        raise SessionRevokedError("this session was ended (password change or sign-out): sign in")
    return Principal(
        user_id=claims.user_id,
        api_key_id=None,
        org_id=claims.org_id,
        role=role,
        project_id=None,
    )


async def _api_key_principal(pool: asyncpg.Pool[Any], key: str) -> Principal:
    live = await api_keys.use_key(pool, sha256(key))
    if live is None:
        raise UnauthorizedError("the API key is not valid (unknown, revoked or expired)")
    return Principal(
        user_id=None,
        api_key_id=live.id,
        org_id=live.org_id,
        role=live.role,
        project_id=live.project_id,
    )


async def assert_project_access(
    pool: asyncpg.Pool[Any], principal: Principal, project_id: uuid.UUID
) -> ProjectContext:
    """The project, checked against the caller's organisation (and an API key's pinned project).

    Raises `ProjectNotFoundError` (404) when the project does not exist, belongs to another
    organisation, or is not the project an API key is bound to.
    """
    if principal.project_id is not None and principal.project_id != project_id:
        raise ProjectNotFoundError("project not found")
    org_id = await projects.org_of(pool, project_id)
    if org_id is None or org_id != principal.org_id:
        raise ProjectNotFoundError("project not found")
    return ProjectContext(
        principal=principal, org_id=org_id, project_id=project_id, role=principal.role
    )


def require_role(principal: Principal, minimum: MemberRole) -> None:
    if not role_at_least(principal.role, minimum):
        raise ForbiddenError(
            f"this action needs the {minimum.value} role or higher; you are {principal.role.value}",
            details={"required_role": minimum.value, "role": principal.role.value},
        )


def require_user(principal: Principal) -> uuid.UUID:
    """USER/ORG-scoped routes act for a person; an API key is bound to its project only."""
    if principal.user_id is None:
        raise ForbiddenError("API keys can only access their own project's resources")
    return principal.user_id
