"""What happens to jobs that wait on others when those finish.

Completion releases dependants (one fewer pending dependency; at zero they become claimable):
that step is part of the completion statement itself (codity_release_dependants, see
complete_jobs in outcomes.sql). A dependency dead-lettered or cancelled can never complete, so
its dependants (and theirs) are cancelled, by a statement after the job's own update, in the
same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from codity.db.queries import sql


async def cancel_dependants(tx: Any, doomed_ids: Sequence[int]) -> list[int]:
    if not doomed_ids:
        return []
    rows = await tx.fetch(sql("cancel_dependants"), list(doomed_ids))
    return [r["id"] for r in rows]
