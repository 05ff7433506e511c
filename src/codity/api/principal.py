"""Who is calling: the authenticated principal and the checked project context.

Kept in a module of its own so that `security` (which builds them) and `deps` (which hands them
to handlers) can both import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final
from uuid import UUID

from codity.domain.states import MemberRole

#: Role order: owner > admin > member > viewer. A role satisfies every role ranked at or below it.
ROLE_RANK: Final[MappingProxyType[MemberRole, int]] = MappingProxyType(
    {MemberRole.VIEWER: 0, MemberRole.MEMBER: 1, MemberRole.ADMIN: 2, MemberRole.OWNER: 3}
)


def role_at_least(role: MemberRole, minimum: MemberRole) -> bool:
    return ROLE_RANK[role] >= ROLE_RANK[minimum]


@dataclass(frozen=True)
class Principal:
    """The caller. `org_id` always comes from the token or the API key, never from a parameter.

    A user principal has `user_id`; an API-key principal has `api_key_id` and is pinned to one
    project (`project_id`), with the role the key was created with.
    """

    user_id: UUID | None
    api_key_id: UUID | None
    org_id: UUID
    role: MemberRole
    project_id: UUID | None

    @property
    def is_api_key(self) -> bool:
        return self.api_key_id is not None


@dataclass(frozen=True)
class ProjectContext:
    """A project the guard has checked belongs to the caller's organisation."""

    principal: Principal
    org_id: UUID
    project_id: UUID
    role: MemberRole
