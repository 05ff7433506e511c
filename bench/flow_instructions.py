"""The server's cost of a flow-controlled claim, counted in instructions (callgrind).

Usage: .venv/bin/python bench/flow_instructions.py [--claims N] [--only P,F,K,R,S] [--sql FILE ...]

`codity bench flow` times each mechanism in a drain, where two workers, their completions and
the machine's other load move every run by more than a step of the claim costs. This counts
the instructions a PostgreSQL backend executes for one claim of 100 (the drain's claim size),
on a cluster under `valgrind --tool=callgrind` (bench/server_instructions.py's), in a state
like the drain's: 5,000 queued jobs a queue with 1,000 concurrency keys among them, each claim
committed, the previous claim's jobs completed before the next one, and the claimer's cursors
kept. One connection per case makes N claims after 10 of warm-up (plans made), minus a
connection that made only the warm-up (server_instructions.py's `_count`):

- P: `claim_jobs`, a plain queue (the drain with every mechanism off);
- F: `claim_jobs_flow` on a plain queue (the flow statement's own steps);
- K: a key limit of 10 (`claim_jobs_flow`, codity_keyed_candidates);
- R: a rate limit of 1,000,000 a second (room to spare: claimed without the queue's lock);
- S: fair shares between two projects, a queue each (the claimer's held counts given, as the
  worker gives them).

Each `--sql FILE` runs in the database before the cases (a variant of a function, say). Slow:
about a minute a case.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.server_instructions import _count, _wait_ready, callgrind_cluster
from codity import VERSION, core
from codity.db import migrate
from codity.db.pool import connect
from codity.db.queries import sql

JOBS = 5000  # enough for both connections' warm-up and the claims measured
KEYS = 1000
CLAIM = 100
CASES = ("P", "F", "K", "R", "S")


class Drainer:
    """Claims 100 at a time from one case's queues, completing the previous claim's jobs."""

    def __init__(self, setup: Any, worker: Any, case: str, queue_ids: list[Any]) -> None:
        self.setup, self.worker, self.case, self.queue_ids = setup, worker, case, queue_ids
        self.cursors: dict[Any, tuple[int, Any, int]] = {}
        self.previous: list[int] = []

    async def claim(self, conn: Any, _i: int = 0) -> None:
        ids = self.queue_ids
        at = [[self.cursors.get(q, (None, None, None))[i] for q in ids] for i in range(3)]
        if self.case == "P":
            rows = await conn.fetch(sql("claim_jobs"), self.worker, 30_000, ids, CLAIM, *at)
        else:
            fair = self.case == "S"
            held = [len(self.previous) // len(ids)] * len(ids) if fair else None
            rows = await conn.fetch(
                sql("claim_jobs_flow"), self.worker, 30_000, ids, CLAIM, fair, *at, held, True
            )
        jobs = [r for r in rows if r["id"] is not None]
        if len(jobs) != CLAIM:
            raise RuntimeError(f"case {self.case} claimed {len(jobs)} of {CLAIM}")
        for queue_id in ids:
            of_queue = [r for r in jobs if r["queue_id"] == queue_id]
            if of_queue:
                last = max(of_queue, key=lambda r: (-r["priority"], r["run_at"], r["id"]))
                self.cursors[queue_id] = (last["priority"], last["run_at"], last["id"])
        if self.previous:
            await self.setup.execute(
                "UPDATE jobs SET status = 'completed', finished_at = now(), worker_id = NULL, "
                "lock_expires_at = NULL WHERE id = ANY($1)",
                self.previous,
            )
        self.previous = [r["id"] for r in jobs]


async def _queue(setup: Any, project: Any, name: str, **settings: Any) -> Any:
    columns = ", ".join(["project_id", "name", *settings])
    values = ", ".join(f"${i + 1}" for i in range(2 + len(settings)))
    queue_id = await setup.fetchval(
        f"INSERT INTO queues ({columns}) VALUES ({values}) RETURNING id",
        project,
        name,
        *settings.values(),
    )
    for start in range(0, JOBS, 2000):
        batch = [core.NewJob("noop", concurrency_key=f"k{(start + i) % KEYS}") for i in range(2000)]
        await core.enqueue_many(setup, queue_id, batch)
    return queue_id


async def measure(
    url: str, dumps: Path, cases: list[str], variants: list[str], claims: int
) -> None:
    admin = await asyncpg.connect(f"{url}/postgres")
    await admin.execute('CREATE DATABASE "cg_flow"')
    await admin.close()
    db = f"{url}/cg_flow"
    await asyncio.to_thread(migrate.upgrade, db)
    setup = await connect(db, application_name="codity-cg-setup")
    for variant in variants:
        await setup.execute(Path(variant).read_text())
    org = await setup.fetchval(
        "INSERT INTO organizations (name, slug) VALUES ('cg', 'cg') RETURNING id"
    )
    projects = [
        await setup.fetchval(
            "INSERT INTO projects (org_id, name, slug) VALUES ($1, $2, $2) RETURNING id", org, slug
        )
        for slug in ("cg-a", "cg-b")
    ]
    queues: dict[str, list[Any]] = {}
    for case in cases:
        settings: dict[str, Any] = {}
        if case == "K":
            settings = {"key_concurrency_limit": 10}
        elif case == "R":
            settings = {"rate_limit_count": 1_000_000, "rate_limit_period_ms": 1000}
        queues[case] = [await _queue(setup, projects[0], f"cg-{case.lower()}", **settings)]
        if case == "S":
            queues[case].append(await _queue(setup, projects[1], "cg-s2"))
    await setup.execute("VACUUM ANALYZE jobs")
    every = [q for ids in queues.values() for q in ids]
    worker = await core.register_worker(
        setup, hostname="cg", pid=0, version=VERSION, capacity=CLAIM, queue_ids=every,
        queue_names=[f"q{i}" for i in range(len(every))], handlers=["noop"],
    )  # fmt: skip
    per_claim: dict[str, float] = {}
    for case in cases:
        drainer = Drainer(setup, worker, case, queues[case])
        per_claim[case] = await _count(db, dumps, drainer.claim, drainer.claim, claims)
        beside = f"   {per_claim[case] / per_claim['P']:.3f}x P" if "P" in per_claim else ""
        print(f"  {case}: {per_claim[case] / 1e6:6.2f}M instructions a claim of {CLAIM}{beside}")
    await setup.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claims", type=int, default=25)
    parser.add_argument("--only", default=",".join(CASES), help="cases, comma-separated")
    parser.add_argument("--sql", action="append", default=[], help="SQL run first (a variant)")
    args = parser.parse_args()
    cases = [c for c in args.only.split(",") if c]
    if unknown := set(cases) - set(CASES):
        sys.exit(f"unknown case(s): {', '.join(sorted(unknown))}; known: {', '.join(CASES)}")
    with callgrind_cluster() as (url, dumps):
        await _wait_ready(url)
        await measure(url, dumps, cases, args.sql, args.claims)


if __name__ == "__main__":
    asyncio.run(main())
