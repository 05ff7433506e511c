"""/projects/{project_id}/api-keys: project API keys, shown once, stored as SHA-256, revocable.

A key acts with the role it was created with, inside its one project only. A key cannot be
created with a role above its creator's, and keys cannot create keys (a leaked key must not be
able to mint a replacement that outlives its revocation).
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Path, Response

from codity.api.audit import record_audit
from codity.api.deps import DbPool, ProjectScope
from codity.api.resources._tenancy_common import (
    DEFAULT_LIMIT,
    InvalidCursorError,
    PageCursor,
    PageLimit,
    decode_cursor,
    encode_cursor,
)
from codity.api.routing import Route, Scope
from codity.api.schemas.tenancy import ApiKeyCreate, ApiKeyCreated, ApiKeyPublic, ApiKeysPage
from codity.api.security import require_role, require_user
from codity.api.tokens import new_api_key
from codity.domain.errors import NotFoundError
from codity.domain.states import MemberRole

KeyId = Annotated[uuid.UUID, Path(description="API key id")]
_COLUMNS = "id, name, prefix, role, created_at, last_used_at, expires_at, revoked_at"


class ApiKeyNotFoundError(NotFoundError):
    code = "api_key_not_found"


async def list_api_keys(
    ctx: ProjectScope, pool: DbPool, limit: PageLimit = DEFAULT_LIMIT, cursor: PageCursor = None
) -> ApiKeysPage:
    after = decode_cursor(cursor)
    try:
        after_id = uuid.UUID(after) if after else None
    except ValueError:
        raise InvalidCursorError("cursor is not valid: pass next_cursor back unchanged") from None
    rows = await pool.fetch(
        f"""SELECT {_COLUMNS} FROM api_keys
             WHERE project_id = $1 AND ($2::uuid IS NULL OR id > $2)
             ORDER BY id LIMIT $3""",
        ctx.project_id,
        after_id,
        limit,
    )
    items = [ApiKeyPublic(**dict(r)) for r in rows]
    return ApiKeysPage(
        items=items, next_cursor=encode_cursor(str(items[-1].id)) if len(items) == limit else None
    )


async def create_api_key(body: ApiKeyCreate, ctx: ProjectScope, pool: DbPool) -> ApiKeyCreated:
    creator = require_user(ctx.principal)
    require_role(ctx.principal, body.role)  # no key above its creator's role
    key, prefix, key_hash = new_api_key()
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            f"""INSERT INTO api_keys (project_id, name, prefix, key_hash, role, created_by, expires_at)
                VALUES ($1, $2, $3, $4, $5, $6,
                        CASE WHEN $7::int IS NULL THEN NULL
                             ELSE now() + make_interval(days => $7::int) END)
                RETURNING {_COLUMNS}""",
            ctx.project_id,
            body.name,
            prefix,
            key_hash,
            body.role.value,
            creator,
            body.expires_in_days,
        )
        await record_audit(
            conn,
            ctx.principal,
            "api_key.create",
            project_id=ctx.project_id,
            target_type="api_key",
            target_id=row["id"],
            details={"name": body.name, "role": body.role.value},
        )
    return ApiKeyCreated(**dict(row), key=key)


async def revoke_api_key(key_id: KeyId, ctx: ProjectScope, pool: DbPool) -> Response:
    async with pool.acquire() as conn, conn.transaction():
        found = await conn.fetchval(
            """UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
                WHERE project_id = $1 AND id = $2 RETURNING id""",
            ctx.project_id,
            key_id,
        )
        if found is None:
            raise ApiKeyNotFoundError("API key not found")
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
