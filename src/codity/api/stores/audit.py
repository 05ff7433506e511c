"""The audit trail's one write. SQL: `db/sql/api_audit.sql`."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from codity.core import Conn
from codity.db.queries import bind


async def insert_event(
    conn: Conn,
    *,
    org_id: UUID,
    project_id: UUID | None,
    actor_user_id: UUID | None,
    actor_api_key_id: UUID | None,
    action: str,
    target_type: str | None,
    target_id: str | None,
    details: dict[str, Any],
    request_id: str,
    ip: str | None,
) -> None:
    await bind(
        "api_audit_insert",
        org_id=org_id,
        project_id=project_id,
        actor_user_id=actor_user_id,
        actor_api_key_id=actor_api_key_id,
        action=action,
        target_type=target_type,
        target_id=target_id,
        details=details,
        request_id=request_id,
        ip=ip,
    ).execute(conn)
