"""Request and response models of the organisation, its members, projects and API keys."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Literal

from pydantic import Field

from codity.api.schemas.common import PublicModel, RequestModel, text_field
from codity.api.schemas.email import Email
from codity.domain.states import MemberRole

#: Project slugs: lower-case words joined by dashes, as in URLs.
SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"


class OrgPublic(PublicModel):
    id: uuid.UUID
    name: str
    slug: str
    created_at: dt.datetime


class OrgUpdate(RequestModel):
    name: str = text_field(min_length=1, max_length=200)


class MemberPublic(PublicModel):
    user_id: uuid.UUID
    email: str
    name: str | None
    role: MemberRole
    joined_at: dt.datetime


class MembersPage(PublicModel):
    items: list[MemberPublic]
    next_cursor: str | None


class InvitationPublic(PublicModel):
    id: uuid.UUID
    email: str
    role: MemberRole
    created_at: dt.datetime


class MemberCreate(RequestModel):
    email: Email
    role: MemberRole = MemberRole.MEMBER


class MemberAdded(PublicModel):
    """`added` when the email has an account (it is a member now), `invited` otherwise (the
    membership is created when that email registers)."""

    status: Literal["added", "invited"]
    member: MemberPublic | None = None
    invitation: InvitationPublic | None = None


class MemberUpdate(RequestModel):
    role: MemberRole


class ProjectPublic(PublicModel):
    id: uuid.UUID
    name: str
    slug: str
    created_at: dt.datetime


class ProjectsPage(PublicModel):
    items: list[ProjectPublic]
    next_cursor: str | None


class ProjectCreate(RequestModel):
    name: str = text_field(min_length=1, max_length=200)
    slug: str | None = Field(
        default=None, pattern=SLUG_PATTERN, description="derived from the name when omitted"
    )


class ProjectUpdate(RequestModel):
    name: str = text_field(min_length=1, max_length=200)


class ApiKeyPublic(PublicModel):
    id: uuid.UUID
    name: str
    prefix: str = Field(description="the key's first characters, to tell keys apart")
    role: MemberRole
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None


class ApiKeysPage(PublicModel):
    items: list[ApiKeyPublic]
    next_cursor: str | None


class ApiKeyCreate(RequestModel):
    name: str = text_field(min_length=1, max_length=100)
    role: MemberRole = MemberRole.MEMBER
    expires_in_days: int | None = Field(default=None, ge=1, le=3650)


class ApiKeyCreated(ApiKeyPublic):
    key: str = Field(description="the secret, shown this once: store it now")
