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


class RefreshRequest(RequestModel):
    refresh_token: str = Field(min_length=1, max_length=512)


class SwitchOrgRequest(RequestModel):
    org_id: uuid.UUID


class TokenPair(PublicModel):
    access_token: str
    refresh_token: str
    token_type: Literal["bearer"] = "bearer"  # noqa: S105 - the OAuth token type, not a secret
    expires_in: int = Field(description="seconds until the access token expires")


class UserPublic(PublicModel):
    id: uuid.UUID
    email: str
    name: str | None


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


class RegisterPublic(PublicModel):
    user: UserPublic
    org: OrgRef
    project: ProjectRef
    tokens: TokenPair


class MePublic(PublicModel):
    user: UserPublic
    org: OrgRef = Field(description="the organisation the access token is for")
    role: MemberRole
    memberships: list[MembershipPublic]
    projects: list[ProjectRef] = Field(description="projects of the active organisation")
