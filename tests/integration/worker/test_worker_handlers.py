"""A real Worker records the handlers it runs (workers.handlers), and explain reads them.

The worker serves a paused queue (so it claims nothing and the jobs stay put): a job whose
handler it runs is held back by the pause only; a job whose handler it lacks is also
`handler_not_registered`; once the worker stops, neither has a live worker
(`no_live_worker`). Without the handlers written at registration the first job would be
`handler_not_registered` too.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from tests.factories import make_queue, make_tenant
from tests.integration.worker.helpers import running_worker

from codity.api.stores.jobs import explain_job
from codity.core import NewJob, enqueue
from codity.worker import HandlerRegistry, JobContext


async def test_a_real_worker_records_its_handlers_and_explain_uses_them(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    tenant = await make_tenant(db)
    queue = await make_queue(db, tenant.project_id, name="served", is_paused=True)
    served = await enqueue(db, queue, NewJob("alpha"))
    missing = await enqueue(db, queue, NewJob("gamma"))

    registry = HandlerRegistry()

    @registry.handler("alpha")
    async def alpha(ctx: JobContext) -> None:
        return None

    @registry.handler("beta")
    def beta(ctx: JobContext) -> None:
        return None

    async def blockers(job_id: int) -> dict[str, dict[str, Any]]:
        found = await explain_job(db, tenant.project_id, job_id, dead_after_ms=60_000)
        return {b.code: b.data for b in found.blockers}

    assert set(await blockers(served.id)) == {"queue_paused", "no_live_worker"}
    async with running_worker(database_url, registry, queue_names=("served",)) as worker:
        handlers = await db.fetchval("SELECT handlers FROM workers WHERE id = $1", worker.worker_id)
        assert handlers == ["alpha", "beta"]
        assert set(await blockers(served.id)) == {"queue_paused"}
        found = await blockers(missing.id)
        assert set(found) == {"queue_paused", "handler_not_registered"}
        assert found["handler_not_registered"] == {"handler": "gamma", "live_workers": 1}
    assert set(await blockers(served.id)) == {"queue_paused", "no_live_worker"}
