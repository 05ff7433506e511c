"""Medium 4 — /metrics was public and expensive.

Before: anyone could scrape `/metrics`, which names every tenant's queues, and each scrape ran
several whole-table aggregates. Now: on the API's port it answers only the bearer METRICS_TOKEN
(401 otherwise, also when none is set); METRICS_BIND opens a separate listener without a token
(a private network); the numbers are a snapshot refreshed at most every METRICS_SNAPSHOT_S
however often they are scraped.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import ValidationError
from tests.api.conftest import app_client, make_settings

from codity.api import metrics
from codity.api.app import create_app
from codity.settings import Settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_metrics_need_the_token_on_the_api_port(database_url: str) -> None:
    """Break it: serve `metrics()` without token_matches."""
    for token in (None, "the-scrape-token-0123456789"):
        app = create_app(make_settings(database_url, METRICS_TOKEN=token))
        async with app_client(app) as client:
            for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic x"}):
                r = await client.get("/metrics", headers=headers)
                assert r.status_code == 401, r.text
                assert r.json()["error"]["code"] == "unauthorized"
                assert r.headers["www-authenticate"] == "Bearer"
            allowed = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
            assert allowed.status_code == (200 if token else 401)
            if token:
                assert "codity_queue_depth" in allowed.text


async def test_metrics_bind_serves_a_private_listener_without_a_token(database_url: str) -> None:
    port = _free_port()
    app = create_app(make_settings(database_url, METRICS_BIND=f"127.0.0.1:{port}"))
    async with app_client(app) as client:
        assert (await client.get("/metrics")).status_code == 401  # the public port: still closed
        async with httpx.AsyncClient() as scraper:
            private = await scraper.get(f"http://127.0.0.1:{port}/metrics")
            assert private.status_code == 200
            assert "codity_workers" in private.text
            # Nothing but /metrics is served there.
            assert (await scraper.get(f"http://127.0.0.1:{port}/api/v1/auth/me")).status_code == 404
    async with httpx.AsyncClient() as scraper:  # the listener stops with the app
        try:
            await scraper.get(f"http://127.0.0.1:{port}/metrics", timeout=1)
            stopped = False
        except httpx.TransportError:
            stopped = True
    assert stopped


async def test_scrapes_share_one_snapshot_per_interval(
    app: FastAPI, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 scrapes (50 at once) within the interval cost one snapshot: the database sees the
    aggregates once, not 200 times. Break it: call render() in `_answer` directly, or drop
    the age checks of SnapshotCache.body."""
    taken = 0
    real = metrics.take_snapshot

    async def counted(conn: Any) -> metrics.Snapshot:
        nonlocal taken
        taken += 1
        return await real(conn)

    monkeypatch.setattr(metrics, "take_snapshot", counted)
    app.state.settings = make_settings(database_url, METRICS_TOKEN="t" * 32, METRICS_SNAPSHOT_S=60)
    headers = {"Authorization": "Bearer " + "t" * 32}
    async with app_client(app) as client:

        async def scrape() -> Any:
            return await client.get("/metrics", headers=headers)

        for _ in range(4):
            answers = await asyncio.gather(*(scrape() for _ in range(50)))
            assert {a.status_code for a in answers} == {200}
            assert len({a.text for a in answers}) == 1
        assert taken == 1
        assert app.state.metrics_cache.refreshes == 1


def test_production_refuses_a_guessable_metrics_token() -> None:
    """The token guards every tenant's queue names: in production it must be long enough not
    to be guessed. Break it: drop the METRICS_TOKEN check from Settings._secrets."""
    production = {
        "CODITY_ENV": "production",
        "JWT_SECRET": "p" * 40,
        "JWT_REFRESH_SECRET": "q" * 40,
    }
    with pytest.raises(ValidationError, match="METRICS_TOKEN"):
        Settings(_env_file=None, **production, METRICS_TOKEN="metrics")  # type: ignore[call-arg]
    long_enough = "m" * 32
    accepted = Settings(_env_file=None, **production, METRICS_TOKEN=long_enough)  # type: ignore[call-arg]
    assert accepted.metrics_token == long_enough
    # Outside production (tests, the demo) a short one is fine.
    assert Settings(_env_file=None, CODITY_ENV="test", METRICS_TOKEN="m").metrics_token == "m"  # type: ignore[call-arg]
