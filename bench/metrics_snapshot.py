"""`/metrics` under many scrapers: scrapes per second against statements per second.

    .venv/bin/python bench/metrics_snapshot.py --rows 200000 --scrapers 20 --seconds 10

Fills a scratch database (the EXPLAIN harness's fill), then runs the API in-process (its
lifespan, its pool) and `--scrapers` clients scraping `/metrics` with the token as fast as they
can for `--seconds`, once with the snapshot (METRICS_SNAPSHOT_S=5, the default) and once with
METRICS_SNAPSHOT_S=0 (every scrape queries the database: what the endpoint did before). Counts
the statements the collector sends (every `bind` in codity.api.metrics is one) and prints
scrapes/s, statements/s and the scrape latency. Measures, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import httpx
from asgi_lifespan import LifespanManager

from codity.api import metrics
from codity.api.app import create_app
from codity.cli.bench import bench_server
from codity.db.pool import connect
from codity.devtools.explain import fill, scratch_database
from codity.settings import Settings

TOKEN = "bench-" + "m" * 32


async def _run(url: str, snapshot_s: float, scrapers: int, seconds: float) -> dict[str, float]:
    statements = 0
    real_bind = metrics.bind

    def counted(name: str, **params: Any) -> Any:
        nonlocal statements
        statements += 1
        return real_bind(name, **params)

    metrics.bind = counted  # type: ignore[assignment]
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        CODITY_ENV="test",
        DATABASE_URL=url,
        METRICS_TOKEN=TOKEN,
        METRICS_SNAPSHOT_S=snapshot_s,
        LOG_LEVEL="WARNING",
    )
    app = create_app(settings)
    latencies: list[float] = []
    try:
        async with LifespanManager(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                headers = {"Authorization": f"Bearer {TOKEN}"}
                await client.get("/metrics", headers=headers)  # warm the pool
                statements = 0
                deadline = time.monotonic() + seconds

                async def scraper() -> None:
                    while time.monotonic() < deadline:
                        started = time.perf_counter()
                        r = await client.get("/metrics", headers=headers)
                        r.raise_for_status()
                        latencies.append(time.perf_counter() - started)

                began = time.monotonic()
                await asyncio.gather(*(scraper() for _ in range(scrapers)))
                elapsed = time.monotonic() - began
    finally:
        metrics.bind = real_bind  # type: ignore[assignment]
    latencies.sort()
    return {
        "scrapes_per_s": len(latencies) / elapsed,
        "statements_per_s": statements / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p95_ms": latencies[int(len(latencies) * 0.95)] * 1000,
    }


async def measure(url: str, rows: int, scrapers: int, seconds: float) -> None:
    async with scratch_database(url) as scratch:
        conn = await connect(scratch)
        try:
            await fill(conn, rows)
        finally:
            await conn.close()
        print(f"{rows:,} jobs, {scrapers} concurrent scrapers, {seconds:g} s each")
        print("| METRICS_SNAPSHOT_S | scrapes/s | statements/s | scrape p50 | scrape p95 |")
        print("|---:|---:|---:|---:|---:|")
        for snapshot_s in (5.0, 0.0):
            r = await _run(scratch, snapshot_s, scrapers, seconds)
            print(
                f"| {snapshot_s:g} | {r['scrapes_per_s']:.0f} | {r['statements_per_s']:.1f} | "
                f"{r['p50_ms']:.1f} ms | {r['p95_ms']:.1f} ms |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--scrapers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--dsn", help="a server to use (default: a throwaway cluster)")
    args = parser.parse_args()
    with bench_server(args.dsn) as server:
        asyncio.run(measure(server, args.rows, args.scrapers, args.seconds))


if __name__ == "__main__":
    main()
