"""A connection a worker component keeps for itself.

The producer and the writer (completer, marker, heartbeat) each hold one connection of their
own instead of borrowing one from the pool per statement: a borrowed asyncpg connection is
reset when it goes back (one more round trip per statement), and their statements are prepared
once per connection. A connection that died (database restart, backend ended) is replaced on
the next use; the caller's loop service has already waited out the outage.

`generic_plans`: the connection plans each prepared statement once and keeps the plan
(plan_cache_mode = force_generic_plan) instead of planning it on every execution: planning the
claim and the completion on every batch was ~13% of the server's time per job. Only for
statements written to keep their index paths whatever the values (the claims, the completion,
the writer's other statements: `= ANY(ARRAY(...))` for rows found by key, LATERAL ... OFFSET 0
for the dependants walk; tests/integration/test_generic_plans.py checks every one), and only
when statements are cached at all (not behind PgBouncer in transaction mode).

A kept plan is made with the table's size as it is at the connection's first execution, and a
worker often starts on a new or nearly empty `jobs` table: there a sequential scan is the
cheapest way to find 100 rows by key, and that plan was kept while the table grew (the
completion and the flow claim read all of `jobs` for every batch; `codity bench xmin` saw a
worker's claims grow to 0.9 s and the drain fall to 0.37x of the enqueue rate). So these
connections also turn sequential scans off (`enable_seqscan = off`: a penalty, not a ban, so
a table with no index for the statement is still read): every statement they run has an index
path, and the plan no longer depends on the size the table had at the first execution.

`command_timeout_s`: a statement whose reply does not come in time raises TimeoutError (an
outage to the loop service: the connection is discarded and the loop backs off). Without it a
connection that went silent (a partition, a dropped reply) would hang its statement until the
kernel gives up on the socket, many minutes later, and with a claim hung that way the heartbeat
(which waits for the claim lock) would stop too.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from codity.db.pool import caches_statements, connect

#: What a connection that keeps its plans sets (see the module's docstring).
GENERIC_PLAN_SETTINGS = "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off"


class HeldConnection:
    def __init__(
        self,
        database_url: str,
        *,
        application_name: str,
        generic_plans: bool = False,
        command_timeout_s: float | None = None,
    ) -> None:
        self._url = database_url
        self._name = application_name
        self._generic_plans = generic_plans
        self._command_timeout_s = command_timeout_s
        self._conn: Any = None
        # Several components may share one (the writer's): one reconnect at a time, or two
        # would each open a connection and one would leak.
        self._connecting = asyncio.Lock()

    async def get(self) -> Any:
        async with self._connecting:
            if self._conn is not None and self._conn.is_closed():
                self._conn = None
            if self._conn is None:
                conn = await connect(
                    self._url,
                    application_name=self._name,
                    command_timeout_s=self._command_timeout_s,
                )
                if self._generic_plans and caches_statements():
                    await conn.execute(GENERIC_PLAN_SETTINGS)
                self._conn = conn
            return self._conn

    def discard(self) -> None:
        """After an error: drop the connection (it may be mid-operation or broken); the next
        `get()` opens a fresh one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.terminate()

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await asyncio.wait_for(conn.close(), timeout=2)
            except Exception:
                with contextlib.suppress(Exception):
                    conn.terminate()
