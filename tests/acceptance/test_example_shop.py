"""examples/shop end to end: FastAPI writes an order and enqueues its confirmation in one
SQLAlchemy transaction; a real worker sends it. A failure before the commit leaves neither an
order nor a job. Uses codity.testing's pytest fixtures, as an application's own tests would."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import httpx
from asgi_lifespan import LifespanManager

from codity.testing import TestDatabase, TestWorker

# The example is run from examples/ (as its README says): put that directory on the path.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
tasks = importlib.import_module("shop.tasks")
create_app = importlib.import_module("shop.web").create_app


async def test_an_order_and_its_confirmation_commit_together(
    codity_database: TestDatabase, codity_worker: TestWorker
) -> None:
    await codity_database.setup(tasks.app)
    api = create_app(codity_database.url)
    async with (
        LifespanManager(api),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api), base_url="http://shop.test"
        ) as http,
    ):
        placed = await http.post("/orders", json={"email": "ada@example.com", "total_cents": 1250})
        assert placed.status_code == 201, placed.text
        failed = await http.post(
            "/orders",
            json={"email": "bob@example.com", "total_cents": 99, "fail_before_commit": True},
        )
        assert failed.status_code == 500

    drained = await codity_worker.run_until_empty(tasks.app)
    assert drained.counts == {"completed": 1}
    conn = await codity_database.connect()
    try:
        orders = await conn.fetch("SELECT id, email FROM shop_orders")
        emails = await conn.fetch("SELECT order_id, recipient FROM shop_emails")
        job = await conn.fetchrow("SELECT handler, payload FROM jobs")
    finally:
        await conn.close()
    order_id = placed.json()["id"]
    assert [tuple(r) for r in orders] == [(order_id, "ada@example.com")]
    assert [tuple(r) for r in emails] == [(order_id, "ada@example.com")]
    assert job["handler"] == "shop.tasks.send_order_confirmation"
    await tasks.app.aclose()
