"""A claim that writes no index entry, beside the ceiling's claim, on the ceiling's minimal SQL.

    .venv/bin/python bench/hot_claim_probe.py --runs 6 [--shape 2x100 ...] [--dsn URL]

ADR-24 and ADR-31 end on the same open question: the 2.0x target needs a claim that writes
no index entry, a redesign of the claim, the reaper and the API's lists. This measures the most
it could buy before anyone builds it, on `codity bench ceiling`'s tables and statements (no
fencing, no triggers; `fillfactor = 80` as `jobs` has, or `--fillfactor N`):

- `indexed`: the ceiling, with the two indexes of `jobs` a claim writes into besides the
  primary key (the lists' `(queue_id, status, id)`, the leases' `lock_expires_at`). They and
  the claim index name `status`, which the claim changes, so every claim is a non-HOT update:
  a new version with three index entries, as ADR-24 counted in the engine.
- `hot`: the claim index's predicate names a column only the completion changes (`done`), the
  finished jobs are listed by `(queue_id, id) WHERE done`, and the claim changes only columns
  no index names. A claim is then a HOT update when the page has room: no index entry at all.
  Leased jobs stay in the claim index, so every claim steps over the leased ones ahead of it
  (`status = 'queued'` is checked on the row), as the redesign's claim would. The completion
  writes two entries in either shape.

The two take turns run by run; prints the medians, their ratio, and the share of the table's
updates (claims and completions) that were HOT (`pg_stat_user_tables`). Measures, asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import asyncpg

from codity.cli._loop import run as run_loop
from codity.cli.bench import bench_server
from codity.cli.benchmarks import (
    _CEILING_CLAIM,
    _CEILING_COMPLETE,
    _CEILING_DDL,
    drain_ceiling,
    empty_database,
    fill_ceiling,
)
from codity.db.dsn import plain_dsn


def _edited(text: str, old: str, new: str) -> str:
    """`text` with `old` replaced; the ceiling's SQL is the base, so a change there stops here."""
    if old not in text:
        raise RuntimeError(f"the ceiling's SQL no longer has {old!r}")
    return text.replace(old, new)


_TABLE_END = "payload jsonb NOT NULL DEFAULT '{}');"

#: The ceiling, with the two indexes of `jobs` a claim writes
#: into besides the primary key: the lists' (queue_id, status, id) and the leases'.
INDEXED_DDL = _edited(
    _CEILING_DDL,
    _TABLE_END,
    "payload jsonb NOT NULL DEFAULT '{}') WITH (fillfactor = {fillfactor});",
) + (
    "CREATE INDEX ceiling_queue_status ON ceiling_jobs (queue_id, status, id);\n"
    "CREATE INDEX ceiling_lease ON ceiling_jobs (lock_expires_at)"
    " WHERE status IN ('claimed', 'running');\n"
)

#: No index names a column the claim changes: the claim index holds every unfinished job,
#: queued or leased (`done` changes only at completion), the finished ones are listed by
#: (queue_id, id) WHERE done, and a lease's expiry is read from the row.
HOT_DDL = (
    _edited(
        _edited(
            _CEILING_DDL,
            _TABLE_END,
            "payload jsonb NOT NULL DEFAULT '{}', done boolean NOT NULL DEFAULT false)"
            " WITH (fillfactor = {fillfactor});",
        ),
        "WHERE status = 'queued';",
        "WHERE NOT done;",
    )
    + "CREATE INDEX ceiling_queue_done ON ceiling_jobs (queue_id, id) WHERE done;\n"
)

HOT_CLAIM = """
UPDATE ceiling_jobs j SET status = 'running', worker_id = $1, claimed_at = now(),
  lock_expires_at = now() + interval '30 s', attempt = j.attempt + 1
FROM (SELECT id FROM ceiling_jobs WHERE queue_id = 1 AND NOT done AND status = 'queued'
        AND run_at <= now()
      ORDER BY priority DESC, run_at, id FOR UPDATE SKIP LOCKED LIMIT $2) s
WHERE j.id = s.id RETURNING j.id, j.attempt
"""

HOT_COMPLETE = _edited(
    _CEILING_COMPLETE,
    "SET status = 'completed', finished_at = now()",
    "SET status = 'completed', done = true, finished_at = now()",
)

SHAPES = {"indexed": (INDEXED_DDL, _CEILING_CLAIM, _CEILING_COMPLETE),
          "hot": (HOT_DDL, HOT_CLAIM, HOT_COMPLETE)}  # fmt: skip
#: As `jobs` has.
FILLFACTOR = 80


async def drain(
    url: str, shape: str, jobs: int, loops: int, batch: int, fillfactor: int = FILLFACTOR
) -> tuple[float, float]:
    """The drain's rate, and the share of `ceiling_jobs`' updates that were HOT."""
    ddl, claim, complete = SHAPES[shape]
    await fill_ceiling(url, jobs, ddl.replace("{fillfactor}", str(fillfactor)))
    drained = await drain_ceiling(url, loops, batch, claim, complete)
    assert drained.jobs == jobs, drained
    return drained.jobs_per_s, await _hot_share(url, updates=2 * jobs)


async def _hot_share(url: str, updates: int) -> float:
    """The share of `ceiling_jobs`' `updates` updates (a claim and a completion a job) that were
    HOT. A backend reports its counters when its connection ends, which the drain's client does
    not wait for: the read waits (up to 5 s) until all of them are in."""
    conn = await asyncpg.connect(plain_dsn(url))
    try:
        for _ in range(100):
            row = await conn.fetchrow(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                " WHERE relname = 'ceiling_jobs'"
            )
            if row["n_tup_upd"] >= updates:
                return float(row["n_tup_hot_upd"] / row["n_tup_upd"])
            await asyncio.sleep(0.05)
        raise RuntimeError(f"only {row['n_tup_upd']} of {updates} updates counted after 5 s")
    finally:
        await conn.close()


async def measure(server: str, args: argparse.Namespace) -> None:
    async with empty_database(server, "codity_hot_claim") as url:
        print(
            f"{args.jobs} jobs, fillfactor {args.fillfactor},"
            f" medians of {args.runs} runs each, taking turns"
        )
        for text in args.shape:
            loops, batch = (int(n) for n in text.split("x"))
            rates: dict[str, list[float]] = {"indexed": [], "hot": []}
            hot_share: dict[str, list[float]] = {"indexed": [], "hot": []}
            for run in range(args.runs):
                for shape in ("indexed", "hot") if run % 2 == 0 else ("hot", "indexed"):
                    rate, hot = await drain(url, shape, args.jobs, loops, batch, args.fillfactor)
                    rates[shape].append(rate)
                    hot_share[shape].append(hot)
            med = {shape: statistics.median(r) for shape, r in rates.items()}
            print(
                f"  {loops} loops x batch {batch}: indexed {med['indexed']:9,.0f} jobs/s"
                f" (HOT {statistics.median(hot_share['indexed']):.0%} of updates),"
                f" hot {med['hot']:9,.0f} jobs/s"
                f" (HOT {statistics.median(hot_share['hot']):.0%}),"
                f" {med['hot'] / med['indexed']:.3f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--shape", action="append", help="LOOPSxBATCH (default 2x100)")
    parser.add_argument("--fillfactor", type=int, default=FILLFACTOR, help="of ceiling_jobs")
    parser.add_argument("--dsn", help="a server to use (default: a throwaway cluster)")
    args = parser.parse_args()
    args.shape = args.shape or ["2x100"]
    with bench_server(args.dsn) as server:
        run_loop(measure(server, args))


if __name__ == "__main__":
    main()
