"""The EXPLAIN harness behind `codity db explain` and `docs/EXPLAIN.md`.

It measures the claim statement (`sql("claim_jobs")`, the one the workers run) on a realistic
table: a scratch database on the same server, migrated to head, filled with jobs in a realistic
status mix by COPY, then VACUUM ANALYZE. For each of four index configurations it runs
EXPLAIN (ANALYZE, BUFFERS) several times and keeps the median time of the claim's SELECT part
(the subquery's Limit node: find, order, lock). The claim UPDATEs, so every measured run is
inside a transaction that is rolled back: the table is the same for every run.

The configurations are applied in order on the same table, each removing more:
full claim index -> without the id tiebreak -> claim index dropped -> no indexes on jobs.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import platform
import random
import statistics
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from codity.db import migrate
from codity.db.dsn import with_database
from codity.db.pool import connect
from codity.db.queries import sql

CLAIM_STATEMENT = "claim_jobs"
#: How many jobs one claim asks for (a worker's free slots) and the lease it takes.
CLAIM_LIMIT = 10
LEASE_MS = 30_000
DEFAULT_ROWS = 100_000
DEFAULT_RUNS = 25
#: Runs discarded before measuring: the first ones pay for cold caches and plan preparation.
WARMUP_RUNS = 3
FILL_SEED = 42

QUEUE_NAMES = ("emails", "reports", "webhooks", "exports")
#: The claim reads from this queue; it holds a quarter of the rows like every other.
CLAIM_QUEUE = "emails"
#: Status mix of the filled table (shares of 100). Mostly history, a quarter claimable.
STATUS_MIX = (
    ("completed", 55),
    ("queued", 25),
    ("scheduled", 8),
    ("running", 2),
    ("dead_letter", 5),
    ("cancelled", 5),
)
PRIORITIES = (0, 0, 0, 0, 0, 0, 5, 10)

#: The primary key is kept in every configuration: the UPDATE finds each selected row by id,
#: and the foreign keys of job_executions, job_logs, dead_letter_jobs and job_dependencies
#: cannot exist without it.
KEPT_INDEX = "pk_jobs"


@dataclass(frozen=True)
class Configuration:
    name: str
    what: str
    statements: tuple[str, ...]  # applied on top of the previous configuration


CONFIGURATIONS = (
    Configuration("Full claim index", "idx_jobs_claim (queue_id, priority DESC, run_at, id)", ()),
    Configuration(
        "Without id tiebreak",
        "idx_jobs_claim_no_id (queue_id, priority DESC, run_at)",
        (
            "DROP INDEX idx_jobs_claim",
            "CREATE INDEX idx_jobs_claim_no_id ON jobs (queue_id, priority DESC, run_at) "
            "WHERE status = 'queued'",
        ),
    ),
    Configuration(
        "Claim index dropped",
        "the other indexes on jobs only",
        ("DROP INDEX idx_jobs_claim_no_id",),
    ),
    Configuration("No indexes on jobs", f"only the primary key {KEPT_INDEX}", ()),
)


@dataclass(frozen=True)
class Filled:
    claim_queue_id: uuid.UUID
    worker_id: uuid.UUID
    rows: int
    status_counts: dict[str, int]
    claimable_in_queue: int  # queued rows of the claim's queue with run_at <= now()


@dataclass(frozen=True)
class Measurement:
    configuration: Configuration
    median_ms: float
    samples_ms: tuple[float, ...]
    shape: str


# --- plans --------------------------------------------------------------------------------


def walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a JSON plan, depth first."""
    yield node
    for child in node.get("Plans", ()):
        yield from walk(child)


def root_node(explain_json: Any) -> dict[str, Any]:
    """The top plan node from EXPLAIN (FORMAT JSON) output, decoded or not."""
    data = json.loads(explain_json) if isinstance(explain_json, str) else explain_json
    plan: dict[str, Any] = data[0]["Plan"]
    return plan


def select_node(plan: dict[str, Any]) -> dict[str, Any]:
    """The claim's candidate selection: the Limit node above LockRows that found the jobs.

    The claim serves several queues in one statement and reads each queue as up to three index
    ranges (around its cursor), so its plan has an outer Limit (the total) and one Limit over
    LockRows per range; the one that matters is the range that returned the rows (with
    ANALYZE: the most actual rows; without, the first). When no Limit sits on a LockRows (a
    broken claim), the first Limit is returned and the checks fail.
    """
    limits = [n for n in walk(plan) if n["Node Type"] == "Limit"]
    locking = [n for n in limits if n.get("Plans") and n["Plans"][0]["Node Type"] == "LockRows"]
    if locking:
        return max(locking, key=lambda n: n.get("Actual Rows", 0))
    if limits:
        return limits[0]
    raise ValueError("the claim plan has no Limit node: is the statement still a LIMITed claim?")


def describe_node(node: dict[str, Any]) -> str:
    name: str = node["Node Type"]
    if "Index Name" in node:
        name += f" using {node['Index Name']}"
    return name


def _reads_jobs(node: dict[str, Any]) -> bool:
    return any(n.get("Relation Name") == "jobs" for n in walk(node))


def shape(node: dict[str, Any]) -> str:
    """The chain of nodes down to the scan of `jobs`, e.g. `Limit -> LockRows -> Index Scan ...`.

    At a join it follows the child that reads `jobs` (the queues lookup is not the interesting
    part), so the chain ends at the access path the configuration is about.
    """
    parts = [describe_node(node)]
    while node.get("Plans"):
        children = node["Plans"]
        node = next((c for c in children if _reads_jobs(c)), children[0])
        parts.append(describe_node(node))
    return " -> ".join(parts)


def claim_params(filled: Filled) -> tuple[Any, ...]:
    # no cursor ($5-$7 NULL): the claim scans the queue from the front of the index
    return (filled.worker_id, LEASE_MS, [filled.claim_queue_id], CLAIM_LIMIT, None, None, None)


async def explain_claim_json(conn: asyncpg.Connection[Any], filled: Filled) -> dict[str, Any]:
    """EXPLAIN (ANALYZE, BUFFERS) of the claim as a JSON plan; the claim itself is rolled back."""
    tx = conn.transaction()
    await tx.start()
    try:
        raw = await conn.fetchval(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql(CLAIM_STATEMENT),
            *claim_params(filled),
        )
    finally:
        await tx.rollback()
    return root_node(raw)


async def explain_claim_text(conn: asyncpg.Connection[Any], filled: Filled) -> str:
    tx = conn.transaction()
    await tx.start()
    try:
        rows = await conn.fetch(
            "EXPLAIN (ANALYZE, BUFFERS) " + sql(CLAIM_STATEMENT), *claim_params(filled)
        )
    finally:
        await tx.rollback()
    return "\n".join(r[0] for r in rows)


# --- the table ----------------------------------------------------------------------------


def _job_rows(
    rows: int, now: datetime, queue_ids: list[uuid.UUID], worker_id: uuid.UUID
) -> Iterator[list[str]]:
    rng = random.Random(FILL_SEED)
    statuses = [s for s, share in STATUS_MIX for _ in range(share)]
    for n in range(rows):
        queue_id = queue_ids[n % len(queue_ids)]
        status = rng.choice(statuses)
        created = now - timedelta(seconds=rng.uniform(60, 7 * 24 * 3600))
        run_at = created
        attempt, worker, claimed, lease, finished = 0, "", "", "", ""
        if status == "queued":
            run_at = now - timedelta(seconds=rng.uniform(0, 3600))
        elif status == "scheduled":
            run_at = now + timedelta(seconds=rng.uniform(60, 24 * 3600))
        elif status == "running":
            attempt, worker = 1, str(worker_id)
            claimed = (now - timedelta(seconds=rng.uniform(0, 20))).isoformat()
            lease = (now + timedelta(seconds=30)).isoformat()
        elif status in ("completed", "dead_letter"):
            attempt = 1 if status == "completed" else 3
            finished = (created + timedelta(seconds=rng.uniform(0.05, 30))).isoformat()
        elif status == "cancelled":
            finished = (created + timedelta(seconds=5)).isoformat()
        payload = json.dumps(
            {"to": f"user{n}@example.com", "template": "receipt", "order_id": 100_000 + n}
        )
        yield [
            str(queue_id),
            "email.send",
            payload,
            status,
            str(rng.choice(PRIORITIES)),
            run_at.isoformat(),
            str(attempt),
            "3",
            worker,
            claimed,
            lease,
            str(attempt),
            created.isoformat(),
            finished,
        ]


COPY_COLUMNS = [
    "queue_id",
    "handler",
    "payload",
    "status",
    "priority",
    "run_at",
    "attempt",
    "max_attempts",
    "worker_id",
    "claimed_at",
    "lock_expires_at",
    "execution_seq",
    "created_at",
    "finished_at",
]


async def fill(conn: asyncpg.Connection[Any], rows: int) -> Filled:
    """A tenant, four queues, one live worker and `rows` jobs (COPY), then VACUUM ANALYZE."""
    org_id = await conn.fetchval(
        "INSERT INTO organizations (name, slug) VALUES ('Explain', 'explain') RETURNING id"
    )
    project_id = await conn.fetchval(
        "INSERT INTO projects (org_id, name, slug) VALUES ($1, 'Explain', 'explain') RETURNING id",
        org_id,
    )
    queue_ids: list[uuid.UUID] = []
    for name in QUEUE_NAMES:
        queue_ids.append(
            await conn.fetchval(
                "INSERT INTO queues (project_id, name) VALUES ($1, $2) RETURNING id",
                project_id,
                name,
            )
        )
    worker_id: uuid.UUID = await conn.fetchval(
        "INSERT INTO workers (hostname, pid, version, capacity) "
        "VALUES ('explain', 1, 'explain', 10) RETURNING id"
    )
    now: datetime = await conn.fetchval("SELECT now()")
    buffer = io.StringIO()
    csv.writer(buffer).writerows(_job_rows(rows, now.astimezone(UTC), queue_ids, worker_id))
    await conn.copy_to_table(
        "jobs",
        source=io.BytesIO(buffer.getvalue().encode()),
        columns=COPY_COLUMNS,
        format="csv",
    )
    await conn.execute("VACUUM ANALYZE jobs")
    counts = {
        r["status"]: r["n"]
        for r in await conn.fetch("SELECT status::text, count(*) AS n FROM jobs GROUP BY 1")
    }
    claim_queue_id = queue_ids[QUEUE_NAMES.index(CLAIM_QUEUE)]
    claimable: int = await conn.fetchval(
        "SELECT count(*) FROM jobs WHERE queue_id = $1 AND status = 'queued' AND run_at <= now()",
        claim_queue_id,
    )
    return Filled(
        claim_queue_id=claim_queue_id,
        worker_id=worker_id,
        rows=rows,
        status_counts=counts,
        claimable_in_queue=claimable,
    )


async def drop_all_indexes_but_pk(conn: asyncpg.Connection[Any]) -> None:
    """Every index on jobs except the primary key; unique constraints are dropped as such."""
    constraints = await conn.fetch(
        """SELECT conname FROM pg_constraint
           WHERE conrelid = 'jobs'::regclass AND contype IN ('u', 'x')"""
    )
    for row in constraints:
        await conn.execute(f'ALTER TABLE jobs DROP CONSTRAINT "{row["conname"]}"')
    indexes = await conn.fetch(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'jobs' AND indexname <> $1",
        KEPT_INDEX,
    )
    for row in indexes:
        await conn.execute(f'DROP INDEX "{row["indexname"]}"')


async def apply(conn: asyncpg.Connection[Any], configuration: Configuration) -> None:
    for statement in configuration.statements:
        await conn.execute(statement)
    if configuration.name == "No indexes on jobs":
        await drop_all_indexes_but_pk(conn)
    await conn.execute("ANALYZE jobs")


async def measure(
    conn: asyncpg.Connection[Any], filled: Filled, configuration: Configuration, runs: int
) -> Measurement:
    samples: list[float] = []
    plan: dict[str, Any] = {}
    for n in range(WARMUP_RUNS + runs):
        plan = await explain_claim_json(conn, filled)
        if n >= WARMUP_RUNS:
            samples.append(float(select_node(plan)["Actual Total Time"]))
    return Measurement(
        configuration=configuration,
        median_ms=statistics.median(samples),
        samples_ms=tuple(samples),
        shape=shape(select_node(plan)),
    )


# --- the scratch database and the report --------------------------------------------------


@contextlib.asynccontextmanager
async def scratch_database(url: str) -> AsyncIterator[str]:
    """A migrated database `codity_explain_<random>` on the server of `url`, dropped after."""
    name = f"codity_explain_{uuid.uuid4().hex[:10]}"
    admin = await connect(url, application_name="codity-explain")
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            scratch_url = with_database(url, name)
            migrate.upgrade(scratch_url)
            yield scratch_url
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@dataclass(frozen=True)
class Report:
    claim_sql: str
    full_plan_text: str
    measurements: list[Measurement]
    filled: Filled
    runs: int
    server_version: str
    machine: str
    generated_at: datetime


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = ""
    with contextlib.suppress(OSError):
        # Timings on a busy machine are noisier; say how busy it was.
        load = ", load average {:.2f} / {:.2f} / {:.2f} (1/5/15 min) at the start".format(
            *os.getloadavg()
        )
    return f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}{load}"


async def run_explain(url: str, *, rows: int = DEFAULT_ROWS, runs: int = DEFAULT_RUNS) -> Report:
    """Fill a scratch database on the server of `url`, measure every configuration, drop it."""
    machine = _machine()
    async with scratch_database(url) as scratch_url:
        conn = await connect(scratch_url, application_name="codity-explain")
        try:
            filled = await fill(conn, rows)
            measurements: list[Measurement] = []
            full_plan_text = ""
            for configuration in CONFIGURATIONS:
                await apply(conn, configuration)
                measurements.append(await measure(conn, filled, configuration, runs))
                if not full_plan_text:
                    full_plan_text = await explain_claim_text(conn, filled)
            version: str = await conn.fetchval("SELECT version()")
        finally:
            await conn.close()
    return Report(
        claim_sql=sql(CLAIM_STATEMENT),
        full_plan_text=full_plan_text,
        measurements=measurements,
        filled=filled,
        runs=runs,
        server_version=version,
        machine=machine,
        generated_at=datetime.now(UTC),
    )


def render_markdown(report: Report) -> str:
    base = report.measurements[0].median_ms
    table = [
        "| Configuration | Indexes on `jobs` | Median select | Penalty | Select plan |",
        "|---|---|---:|---:|---|",
    ]
    for i, m in enumerate(report.measurements):
        penalty = "—" if i == 0 else f"{m.median_ms / base:.1f}×"
        table.append(
            f"| {m.configuration.name} | {m.configuration.what} | {m.median_ms:.3f} ms "
            f"| {penalty} | `{m.shape}` |"
        )
    mix = ", ".join(
        f"{status} {report.filled.status_counts.get(status, 0):,}" for status, _ in STATUS_MIX
    )
    return f"""# EXPLAIN: the claim

> Generated by `codity db explain` (`make explain`) on {report.generated_at:%Y-%m-%d %H:%M} UTC.
> Do not edit by hand: regenerate it. A test fails when the claim in
> `src/codity/db/sql/claim.sql` no longer matches the statement below.

Regenerate with:

```sh
make explain          # or: .venv/bin/codity db explain [--rows 100000] [--runs {DEFAULT_RUNS}]
```

## The statement

`sql("{CLAIM_STATEMENT}")`, exactly as the workers run it, with $1 a worker id, $2 = {LEASE_MS}
(lease ms), $3 = [the `{CLAIM_QUEUE}` queue] and $4 = {CLAIM_LIMIT} (free slots):

```sql
{report.claim_sql}
```

## The data

A scratch database (`codity_explain_<random>`, migrated to head, dropped afterwards) holding
{report.filled.rows:,} jobs spread evenly over {len(QUEUE_NAMES)} queues, loaded with COPY and then
`VACUUM ANALYZE`d. Status mix: {mix}. Each configuration was measured {report.runs} times
after {WARMUP_RUNS} warm-up runs; every run is `EXPLAIN (ANALYZE, BUFFERS)` inside a transaction
that is rolled back, so the table is identical for every run.

## Plan with the full claim index

The SELECT part is `Limit -> LockRows -> ... -> Index Scan using idx_jobs_claim`, with no Sort
node: the index's columns match the ORDER BY term for term, so the first {CLAIM_LIMIT} index
entries are the answer.

```text
{report.full_plan_text}
```

## Four configurations

"Median select" is the median actual total time of the claim's SELECT part (the subquery's
Limit node: find, order and lock the rows), over {report.runs} runs. The configurations are
applied in order, each removing more. "No indexes on jobs" keeps only the primary key
`{KEPT_INDEX}`: the UPDATE finds each selected row by id, and the foreign keys of
`job_executions`, `job_logs`, `dead_letter_jobs` and `job_dependencies` need it.

{chr(10).join(table)}

Why the gap grows with the backlog: with the full index, the first {CLAIM_LIMIT} entries of the
queue's slice of `idx_jobs_claim` are already in claim order, so the work is the same whether
the queue holds ten claimable jobs or a million. Without the id tiebreak the index still
delivers rows by priority and run_at, and an Incremental Sort only orders each small group of
ties. Without a matching index PostgreSQL must fetch every claimable row of the queue (here
{report.filled.claimable_in_queue:,}) and sort them all before it can lock the first
{CLAIM_LIMIT}: that cost grows with the backlog, which is exactly when a queue is busiest.

## Where it ran

- PostgreSQL: {report.server_version}
- Machine: {report.machine}
"""


def write_report(report: Report, path: Path) -> None:
    path.write_text(render_markdown(report), encoding="utf-8")
