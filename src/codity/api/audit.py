"""One helper for the audit trail: every mutation of org, members, projects and keys leaves a
row in `audit_events` (who, what, on which target, from which request and IP).

Details hold identifiers and names only, never secrets or payload values.
"""

from __future__ import annotations

import ipaddress
import uuid
from typing import Any

from codity.api.principal import Principal
from codity.api.request_context import current_client_ip, current_request_id
from codity.api.stores.audit import insert_event
from codity.core import Conn


def _inet(address: str | None) -> str | None:
    """The client address when it is an IP; None otherwise (a Unix socket peer, a test client
    calling itself 'testclient'), so an odd peer can never make an audited change fail."""
    if address is None:
        return None
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return None


async def record_audit(
    conn: Conn,
    actor: Principal,
    action: str,
    *,
    project_id: uuid.UUID | None = None,
    target_type: str | None = None,
    target_id: object = None,
    details: dict[str, Any] | None = None,
    org_id: uuid.UUID | None = None,
) -> None:
    await insert_event(
        conn,
        org_id=org_id or actor.org_id,
        project_id=project_id,
        actor_user_id=actor.user_id,
        actor_api_key_id=actor.api_key_id,
        action=action,
        target_type=target_type,
        target_id=None if target_id is None else str(target_id),
        details=details or {},
        request_id=current_request_id(),
        ip=_inet(current_client_ip()),
    )
