"""/org: the caller's organisation (always the one in the token; there is no org id parameter)."""

from __future__ import annotations

from codity.api.audit import record_audit
from codity.api.deps import CurrentPrincipal, DbPool
from codity.api.routing import Route, Scope
from codity.api.schemas.tenancy import OrgPublic, OrgUpdate
from codity.domain.states import MemberRole

_SELECT = "SELECT id, name, slug, created_at FROM organizations WHERE id = $1"


async def read_org(principal: CurrentPrincipal, pool: DbPool) -> OrgPublic:
    row = await pool.fetchrow(_SELECT, principal.org_id)
    return OrgPublic(**dict(row))


async def update_org(body: OrgUpdate, principal: CurrentPrincipal, pool: DbPool) -> OrgPublic:
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            "UPDATE organizations SET name = $2 WHERE id = $1 RETURNING id, name, slug, created_at",
            principal.org_id,
            body.name,
        )
        await record_audit(
            conn, principal, "org.update", target_type="org", target_id=principal.org_id
        )
    return OrgPublic(**dict(row))


_TAGS = ("organization",)
ROUTES: list[Route] = [
    Route("GET", "/org", read_org, Scope.ORG, MemberRole.VIEWER,
          "The caller's organisation", response_model=OrgPublic, tags=_TAGS),
    Route("PATCH", "/org", update_org, Scope.ORG, MemberRole.OWNER,
          "Rename the organisation", response_model=OrgPublic, tags=_TAGS),
]  # fmt: skip
