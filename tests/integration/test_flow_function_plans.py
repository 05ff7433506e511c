"""The flow functions' kept plans keep their index paths, whoever calls them.

codity_fair_shares, codity_keyed_candidates, codity_rate_window and codity_rate_debit plan
their statements once per session and keep the plans (`SET plan_cache_mode =
force_generic_plan` on the function). A plan kept from a first call made while a table held a
page or two is a sequential scan, and it stays one as the table grows. The worker's
connections turn sequential scans off for the session (worker.connection), but a `codity.core`
caller on a pool connection does not, so the functions carry `enable_seqscan = off`
themselves (migration 0021).

The plans inside a function are not in the caller's EXPLAIN: auto_explain (loaded into this
test's session, nested statements included) sends each statement's plan to the client as a
log message. The first claim runs on a new database, with the session's default settings, as
a pool connection has them.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg
from tests.factories import make_queue, make_tenant, make_worker

from codity import core
from codity.db.queries import sql
from codity.devtools import explain

SMALL_ROWS = 30
#: Tables a kept plan must not read whole (they grow with the install and its traffic).
GROWING_TABLES = {"jobs", "queues", "projects", "queue_rate_windows"}


async def _plans_from_now_on(conn: asyncpg.Connection[Any]) -> list[dict[str, Any]]:
    """The plan of every statement this session runs from now on, nested ones included (the
    returned list fills as statements run)."""
    plans: list[dict[str, Any]] = []

    def on_log(_conn: Any, message: Any) -> None:
        text = str(message.message)
        if text.startswith("duration:") and "{" in text:
            plans.append(json.loads(text[text.index("{") :]))

    conn.add_log_listener(on_log)
    await conn.execute(
        "LOAD 'auto_explain'; "
        "SET auto_explain.log_min_duration = 0; "
        "SET auto_explain.log_nested_statements = on; "
        "SET auto_explain.log_format = json; "
        "SET client_min_messages = log"
    )
    return plans


async def test_the_flow_functions_kept_plans_read_by_index_from_a_new_database(
    db: asyncpg.Connection[Any],
) -> None:
    tenant = await make_tenant(db)
    # All four functions run in one fair claim: fair shares between two projects, keyed
    # candidates with per-key windows (keyed: first in its project's share), a queue-wide
    # window read (rated), and the debit of the starts.
    keyed = await make_queue(
        db,
        tenant.project_id,
        priority=1,
        key_concurrency_limit=2,
        rate_limit=(1000, 1000),
        rate_limit_per_key=True,
    )
    rated = await make_queue(db, tenant.project_id, rate_limit=(1000, 1000))
    other = await make_queue(db)  # another project's
    for queue_id in (keyed, rated, other):
        jobs = [core.NewJob("noop", concurrency_key=f"k{i % 5}") for i in range(SMALL_ROWS)]
        await core.enqueue_many(db, queue_id, jobs)
    worker_id = await make_worker(db)

    plans = await _plans_from_now_on(db)
    claimed = await core.claim(db, worker_id, [keyed, rated, other], 20, 30_000, fair=True)
    assert {job.queue_id for job in claimed} == {keyed, other}

    # The claim itself is planned again on every execution on this connection; the statements
    # inside the functions are the ones planned once and kept.
    top_level = {sql("claim_jobs").strip(), sql("claim_jobs_flow").strip()}
    nested = [p for p in plans if p["Query Text"].strip() not in top_level]
    read_jobs = [
        p for p in nested if any(n.get("Relation Name") == "jobs" for n in explain.walk(p["Plan"]))
    ]
    assert read_jobs, "no statement inside the functions read jobs: auto_explain saw none"
    scanned = [
        (node["Relation Name"], plan["Query Text"].strip()[:60])
        for plan in nested
        for node in explain.walk(plan["Plan"])
        if node["Node Type"] == "Seq Scan" and node.get("Relation Name") in GROWING_TABLES
    ]
    assert scanned == [], f"sequential scans in the functions' kept plans: {scanned}"
