"""Peer: pgqueuer drains N pre-enqueued no-op jobs; prints one JSON line.

Usage: python bench/peer_pgqueuer.py DSN N WORKERS BATCH. Installs pgqueuer's schema first.
Timed like ours: from starting the workers until the last job's handler ran. Over the same
window it reads the machine's busy CPU time (/proc/stat) and its own (the workers run in this
process), as `codity bench` does for its drain (benchmarks.CpuUse).
"""

import asyncio
import json
import os
import resource
import sys
import time
from datetime import timedelta

import asyncpg
from pgqueuer import AsyncpgDriver, PgQueuer, Queries

DSN, N, W, BATCH = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def machine_busy_s() -> float | None:
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]  # as codity's CpuUse counts
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def worker(done: asyncio.Event, counter: list[int]) -> None:
    conn = await asyncpg.connect(DSN)
    pgq = PgQueuer(AsyncpgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: object) -> None:
        counter[0] += 1
        if counter[0] >= N:
            done.set()

    task = asyncio.create_task(pgq.run(batch_size=BATCH, dequeue_timeout=timedelta(seconds=1)))
    await done.wait()
    pgq.shutdown.set()
    await asyncio.wait_for(task, 30)
    await conn.close()


async def main() -> None:
    conn = await asyncpg.connect(DSN)
    q = Queries(AsyncpgDriver(conn))
    exists = await conn.fetchval("SELECT to_regclass('pgqueuer') IS NOT NULL")
    if not exists:
        await q.install()
    await conn.execute("TRUNCATE pgqueuer, pgqueuer_statistics")
    for i in range(0, N, 5000):
        k = min(5000, N - i)
        await q.enqueue(["noop"] * k, [None] * k, [0] * k)
    await conn.execute("VACUUM ANALYZE pgqueuer")
    await conn.close()
    done, counter = asyncio.Event(), [0]
    busy, own = machine_busy_s(), own_cpu_s()
    t = time.perf_counter()
    await asyncio.gather(*(worker(done, counter) for _ in range(W)))
    dt = time.perf_counter() - t
    busy_after, own_after = machine_busy_s(), own_cpu_s()
    out = {"jobs": counter[0], "seconds": dt, "jobs_per_s": counter[0] / dt}
    if busy is not None and busy_after is not None:
        out |= {"busy_s": busy_after - busy, "workers_s": own_after - own}
    print(json.dumps(out))


# The loop pgqueuer's own CLI runs on when uvloop is installed (so does `codity worker`).
try:
    import uvloop
except ImportError:
    asyncio.run(main())
else:
    uvloop.run(main())
