"""Request and response models of /auth/*."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import Field

from codity.api.schemas.common import PublicModel, RequestModel, text_field
from codity.api.schemas.email import Email
from codity.domain.states import MemberRole

#: Passwords: at least 12 characters (length beats composition rules), at most 256 (argon2
#: hashes any length, but an unbounded input is a denial-of-service lever).
MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 256


class RegisterRequest(RequestModel):
    email: Email
    password: str = Field(min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH)
    name: str = text_field(min_length=1, max_length=200)
    org_name: str = text_field(min_length=1, max_length=200)


class LoginRequest(RequestModel):
    email: Email
    password: str = Field(min_length=1, max_length=MAX_PASSWORD_LENGTH)


class SwitchOrgRequest(RequestModel):
    org_id: uuid.UUID


class VerifyEmailRequest(RequestModel):
    token: str = Field(min_length=1, max_length=2000, description="the token of the mailed link")


class ResendVerificationRequest(RequestModel):
    email: Email


class PasswordChange(RequestModel):
    current_password: str = Field(min_length=1, max_length=MAX_PASSWORD_LENGTH)
    new_password: str = Field(min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH)


class InvitationAccept(RequestModel):
    token: str = Field(min_length=1, max_length=512, description="the token of the mailed link")


class AccessToken(PublicModel):
    """A signed-in session. The refresh token is not here: it travels only in the httpOnly
    `codity_refresh` cookie (path /api/v1/auth, SameSite=Strict). `csrf_token` (also in the
    readable `codity_csrf` cookie) must be sent as `X-CSRF-Token` with /auth/refresh and
    /auth/logout."""

    access_token: str
    token_type: Literal["bearer"] = "bearer"  # noqa: S105 - the OAuth token type, not a secret
    expires_in: int = Field(description="seconds until the access token expires")
    csrf_token: str = Field(description="send as X-CSRF-Token with /auth/refresh and /auth/logout")


class UserRef(PublicModel):
    id: uuid.UUID
    email: str
    name: str | None


class UserPublic(UserRef):
    email_verified: bool


class OrgRef(PublicModel):
    id: uuid.UUID
    name: str
    slug: str


class ProjectRef(PublicModel):
    id: uuid.UUID
    name: str
    slug: str


class MembershipPublic(PublicModel):
    org: OrgRef
    role: MemberRole


class VerificationSent(PublicModel):
    """The same answer whether or not the email already had an account (so registration
    cannot be used to find out who has one); the mail sent differs."""

    status: Literal["verification_sent"] = "verification_sent"
    message: str


class EmailVerified(PublicModel):
    email: str
    verified: Literal[True] = True


class InvitationAccepted(PublicModel):
    org: OrgRef
    role: MemberRole


class MePublic(PublicModel):
    user: UserPublic
    org: OrgRef = Field(description="the organisation the access token is for")
    role: MemberRole
    memberships: list[MembershipPublic]
    projects: list[ProjectRef] = Field(description="projects of the active organisation")
