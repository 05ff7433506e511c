"""Which tenant a job belongs to, for the rules that are per tenant while it runs: the email
quota (per project), the http_request allowlist (per project). SQL: `db/sql/tenants.sql`."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from codity.core.connection import Conn
from codity.db.queries import bind


@dataclass(frozen=True)
class Tenant:
    project_id: UUID
    org_id: UUID
    #: Hosts the project allows its http_request jobs to reach although they are internal.
    http_allowlist: frozenset[str]


async def tenant_of_queue(conn: Conn, queue_id: UUID) -> Tenant | None:
    """The tenant of a queue; None when the queue no longer exists."""
    row = await bind("tenant_of_queue", queue_id=queue_id).fetchrow(conn)
    if row is None:
        return None
    return Tenant(
        project_id=row["project_id"],
        org_id=row["org_id"],
        http_allowlist=frozenset(h.lower() for h in row["http_allowlist"]),
    )
