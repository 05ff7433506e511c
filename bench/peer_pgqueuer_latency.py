"""Peer: enqueue -> handler-start latency for pgqueuer at a fixed rate; prints one JSON line.

Usage: python bench/peer_pgqueuer_latency.py DSN N RATE
"""

import asyncio
import json
import sys
import time
from datetime import timedelta

import asyncpg
from pgqueuer import AsyncpgDriver, PgQueuer, Queries

DSN, N, RATE = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
lat: list[float] = []


async def main() -> None:
    wc = await asyncpg.connect(DSN)
    q0 = Queries(AsyncpgDriver(wc))
    if not await wc.fetchval("SELECT to_regclass('pgqueuer') IS NOT NULL"):
        await q0.install()
    await wc.execute("TRUNCATE pgqueuer, pgqueuer_statistics")
    pgq = PgQueuer(AsyncpgDriver(wc))
    done = asyncio.Event()

    @pgq.entrypoint("lat")
    async def h(job: object) -> None:
        lat.append(time.time() - float(job.payload.decode()))  # type: ignore[attr-defined]
        if len(lat) >= N:
            done.set()

    run = asyncio.create_task(pgq.run(batch_size=10, dequeue_timeout=timedelta(seconds=5)))
    await asyncio.sleep(1)
    ec = await asyncpg.connect(DSN)
    q = Queries(AsyncpgDriver(ec))
    began = time.monotonic()
    for i in range(N):
        await q.enqueue("lat", str(time.time()).encode())
        # paced by the schedule, as codity's side is: at 2,000/s the enqueue round trip counts
        await asyncio.sleep(max(0.0, began + (i + 1) / RATE - time.monotonic()))
    await asyncio.wait_for(done.wait(), 60)
    pgq.shutdown.set()
    await asyncio.wait_for(run, 30)
    s = sorted(lat)
    print(
        json.dumps(
            {
                "p50_ms": s[len(s) // 2] * 1000,
                "p95_ms": s[int(len(s) * 0.95)] * 1000,
                "p99_ms": s[int(len(s) * 0.99)] * 1000,
            }
        )
    )


# The loop pgqueuer's own CLI runs on when uvloop is installed (so does `codity worker`).
try:
    import uvloop
except ImportError:
    asyncio.run(main())
else:
    uvloop.run(main())
