"""/projects/{project_id}/api-keys: project API keys, shown once, stored as SHA-256, revocable.

A key acts inside its one project only, with the lower of its own role and its creator's
current role in the organisation; it stops working when its creator leaves (and is revoked
then). A key cannot be created with a role above its creator's, keys cannot create keys (a
leaked key must not be able to mint a replacement that outlives its revocation), and every key
expires (API_KEY_TTL_DAYS, 90, by default).
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Path, Response

from codity.api.audit import record_audit
from codity.api.deps import AppSettings, DbPool, ProjectScope
from codity.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from codity.api.routing import Route, Scope
from codity.api.schemas.common import DEFAULT_PAGE_SIZE
from codity.api.schemas.tenancy import ApiKeyCreate, ApiKeyCreated, ApiKeysPage
from codity.api.security import require_role, require_user
from codity.api.stores import api_keys as store
from codity.api.tokens import new_api_key
from codity.domain.states import MemberRole

KeyId = Annotated[uuid.UUID, Path(description="API key id")]


async def list_api_keys(
    ctx: ProjectScope, pool: DbPool, limit: Limit = DEFAULT_PAGE_SIZE, cursor: Cursor = None
) -> ApiKeysPage:
    after = decode_cursor(cursor, uuid.UUID)
    items = await store.list_keys(
        pool, ctx.project_id, limit=limit, after_id=after[0] if after else None
    )
    return ApiKeysPage(items=items, next_cursor=next_cursor(items, limit, lambda k: (k.id,)))


async def create_api_key(
    body: ApiKeyCreate, ctx: ProjectScope, pool: DbPool, settings: AppSettings
) -> ApiKeyCreated:
    """Every key expires (API_KEY_TTL_DAYS unless asked otherwise) and never does more than its
    creator may at the moment it is used."""
    creator = require_user(ctx.principal)
    require_role(ctx.principal, body.role)  # no key above its creator's role
    key, prefix, key_hash = new_api_key()
    async with pool.acquire() as conn, conn.transaction():
        created = await store.create_key(
            conn,
            ctx.project_id,
            name=body.name,
            prefix=prefix,
            key_hash=key_hash,
            role=body.role,
            created_by=creator,
            expires_in_days=body.expires_in_days or settings.api_key_ttl_days,
        )
        await record_audit(
            conn,
            ctx.principal,
            "api_key.create",
            project_id=ctx.project_id,
            target_type="api_key",
            target_id=created.id,
            details={"name": body.name, "role": body.role.value},
        )
    return ApiKeyCreated(**created.model_dump(), key=key)


async def revoke_api_key(key_id: KeyId, ctx: ProjectScope, pool: DbPool) -> Response:
    async with pool.acquire() as conn, conn.transaction():
        await store.revoke_key(conn, ctx.project_id, key_id)
        await record_audit(
            conn,
            ctx.principal,
            "api_key.revoke",
            project_id=ctx.project_id,
            target_type="api_key",
            target_id=key_id,
        )
    return Response(status_code=204)


_TAGS = ("api-keys",)
BASE = "/projects/{project_id}/api-keys"
ROUTES: list[Route] = [
    Route("GET", BASE, list_api_keys, Scope.PROJECT, MemberRole.VIEWER,
          "API keys of the project (never the secrets)", response_model=ApiKeysPage, tags=_TAGS),
    Route("POST", BASE, create_api_key, Scope.PROJECT, MemberRole.ADMIN,
          "Create an API key: the secret is in this response only",
          response_model=ApiKeyCreated, status_code=201, tags=_TAGS),
    Route("DELETE", BASE + "/{key_id}", revoke_api_key, Scope.PROJECT, MemberRole.ADMIN,
          "Revoke an API key", status_code=204, tags=_TAGS),
]  # fmt: skip
