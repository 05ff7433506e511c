"""Request and response models of the organisation, its members, projects and API keys."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Self

from pydantic import Field, StringConstraints, model_validator

from codity.api.schemas.auth import UserRef
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
    expires_at: dt.datetime = Field(description="the mailed link stops working then")
    invited_by_email: str | None


class InvitationsPage(PublicModel):
    items: list[InvitationPublic]
    next_cursor: str | None


class InvitationCreate(RequestModel):
    """Invite someone: a single-use link is mailed to `email`; the person accepts it signed in
    with that (verified) email. Inviting the same email again replaces the earlier link."""

    email: Email
    role: MemberRole = MemberRole.MEMBER


class MemberUpdate(RequestModel):
    role: MemberRole


#: A host name (or IP literal) an http_request may reach although it is internal.
AllowedHost = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=253, to_lower=True, strip_whitespace=True,
        pattern=r"^[a-z0-9]([a-z0-9.:_-]*[a-z0-9])?$",
    ),
]  # fmt: skip


class ProjectPublic(PublicModel):
    id: uuid.UUID
    name: str
    slug: str
    weight: int = Field(
        description="fair shares: workers serving several projects share their claims "
        "between the projects with work in proportion to it"
    )
    created_at: dt.datetime
    http_allowlist: list[str] = Field(
        description="hosts this project's http_request jobs may reach although internal "
        "(only those the deployment's HTTP_HANDLER_ALLOWLIST names too)"
    )


class ProjectsPage(PublicModel):
    items: list[ProjectPublic]
    next_cursor: str | None


class ProjectCreate(RequestModel):
    name: str = text_field(min_length=1, max_length=200)
    slug: str | None = Field(
        default=None, pattern=SLUG_PATTERN, description="derived from the name when omitted"
    )


class ProjectUpdate(RequestModel):
    """Only the fields present change."""

    name: str | None = text_field(min_length=1, max_length=200, default=None)
    weight: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="fair-share weight (default 1); set by an organisation admin (a person)",
    )
    http_allowlist: list[AllowedHost] | None = Field(
        default=None,
        max_length=50,
        description="hosts this project's http_request jobs may reach although internal "
        "(only those the deployment's HTTP_HANDLER_ALLOWLIST names too); [] for none",
    )

    @model_validator(mode="after")
    def _something(self) -> Self:
        fields = ("name", "weight", "http_allowlist")
        for field in fields:
            if field in self.model_fields_set and getattr(self, field) is None:
                raise ValueError(f"{field} cannot be null (leave it out to keep it)")
        if not self.model_fields_set & set(fields):
            raise ValueError("give name, weight, http_allowlist or several")
        return self


class ApiKeyPublic(PublicModel):
    id: uuid.UUID
    name: str
    prefix: str = Field(description="the key's first characters, to tell keys apart")
    role: MemberRole = Field(
        description="the most the key may do; it never does more than its creator may now"
    )
    created_at: dt.datetime
    created_by: UserRef | None = Field(
        description="who created it (the key stops working when they leave the organisation)"
    )
    last_used_at: dt.datetime | None
    expires_at: dt.datetime = Field(
        description="every key expires (default API_KEY_TTL_DAYS after creation)"
    )
    revoked_at: dt.datetime | None


class ApiKeysPage(PublicModel):
    items: list[ApiKeyPublic]
    next_cursor: str | None


class ApiKeyCreate(RequestModel):
    name: str = text_field(min_length=1, max_length=100)
    role: MemberRole = MemberRole.MEMBER
    expires_in_days: int | None = Field(
        default=None, ge=1, le=3650, description="default: API_KEY_TTL_DAYS (90)"
    )


class ApiKeyCreated(ApiKeyPublic):
    key: str = Field(description="the secret, shown this once: store it now")
