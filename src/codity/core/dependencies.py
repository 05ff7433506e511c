"""What happens to jobs that wait on others when those finish.

Completion releases dependants (one fewer pending dependency; at zero they become claimable).
A dependency dead-lettered or cancelled can never complete, so its dependants (and theirs) are
cancelled. Both run as statements after the job's own update, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from codity.db.queries import sql
from codity.domain.states import JobStatus


async def release_dependants(tx: Any, completed_ids: Sequence[int]) -> list[UUID]:
    """Returns the queues that got newly claimable jobs (to NOTIFY)."""
    if not completed_ids:
        return []
    rows = await tx.fetch(sql("release_dependants"), list(completed_ids))
    return sorted({r["queue_id"] for r in rows if r["status"] == JobStatus.QUEUED})


async def cancel_dependants(tx: Any, doomed_ids: Sequence[int]) -> list[int]:
    if not doomed_ids:
        return []
    rows = await tx.fetch(sql("cancel_dependants"), list(doomed_ids))
    return [r["id"] for r in rows]
