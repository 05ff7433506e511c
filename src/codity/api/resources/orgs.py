"""/org: the caller's organisation (always the one in the token; there is no org id parameter)."""

from __future__ import annotations

from codity.api.audit import record_audit
from codity.api.deps import CurrentPrincipal, DbPool
from codity.api.routing import Route, Scope
from codity.api.schemas.tenancy import OrgPublic, OrgUpdate
from codity.api.stores import orgs as store
from codity.domain.states import MemberRole


async def read_org(principal: CurrentPrincipal, pool: DbPool) -> OrgPublic:
    return await store.get_org(pool, principal.org_id)


async def update_org(body: OrgUpdate, principal: CurrentPrincipal, pool: DbPool) -> OrgPublic:
    async with pool.acquire() as conn, conn.transaction():
        org = await store.rename_org(conn, principal.org_id, body.name)
        await record_audit(
            conn, principal, "org.update", target_type="org", target_id=principal.org_id
        )
    return org


_TAGS = ("organization",)
ROUTES: list[Route] = [
    Route("GET", "/org", read_org, Scope.ORG, MemberRole.VIEWER,
          "The caller's organisation", response_model=OrgPublic, tags=_TAGS),
    Route("PATCH", "/org", update_org, Scope.ORG, MemberRole.OWNER,
          "Rename the organisation", response_model=OrgPublic, tags=_TAGS),
]  # fmt: skip
