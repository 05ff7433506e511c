"""Peer: pgqueuer's bulk enqueue of N jobs with distinct JSON payloads; prints one JSON line.

Usage: python bench/peer_pgqueuer_enqueue.py DSN N. Installs pgqueuer's schema first. Timed
like ours (`codity bench enqueue`): the payloads are built first, then the clock covers
encoding them and pgqueuer's `Queries.enqueue` in chunks of 5,000 (one unnest INSERT each).
"""

import asyncio
import json
import sys
import time

import asyncpg
from pgqueuer import AsyncpgDriver, Queries

DSN, N = sys.argv[1], int(sys.argv[2])
CHUNK = 5000


async def main() -> None:
    conn = await asyncpg.connect(DSN)
    q = Queries(AsyncpgDriver(conn))
    if not await conn.fetchval("SELECT to_regclass('pgqueuer') IS NOT NULL"):
        await q.install()
    await conn.execute("TRUNCATE pgqueuer, pgqueuer_statistics")
    payloads = [{"i": i} for i in range(N)]
    t = time.perf_counter()
    for start in range(0, N, CHUNK):
        part = payloads[start : start + CHUNK]
        k = len(part)
        await q.enqueue(["noop"] * k, [json.dumps(p).encode() for p in part], [0] * k)
    dt = time.perf_counter() - t
    count = await conn.fetchval("SELECT count(*) FROM pgqueuer")
    await conn.close()
    print(json.dumps({"jobs": count, "seconds": dt, "jobs_per_s": count / dt}))


# The loop pgqueuer's own CLI runs on when uvloop is installed (so does `codity worker`).
try:
    import uvloop
except ImportError:
    asyncio.run(main())
else:
    uvloop.run(main())
