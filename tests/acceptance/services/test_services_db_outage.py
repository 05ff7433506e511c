"""A 30-second database outage under the real services: the API process, two workers and a
scheduler keep running; the API answers 503 with the error envelope (code
`database_unavailable`) and `/readyz` fails while the database is away, and both recover by
themselves when it is back; workers and the scheduler reconnect; every enqueue the system
acknowledged (201 from the API, or a committed `core.enqueue`) is completed, none lost.

The cluster is the test's own (`own_cluster`), stopped with `pg_ctl stop -m fast` and started
again 30 s later on the same port. Before the outage, the API's connection is also torn in the
middle of a request (its reply lost: `tests/chaos/cutter.py`), which must answer 503 as well.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.acceptance.services.own_cluster import OwnCluster, own_cluster
from tests.acceptance.services.service_procs import Procs, wait_for
from tests.accounts import sign_up
from tests.chaos.cutter import Cutter, running_cutter
from tests.factories import make_queue

from codity import core
from codity.db.pool import connect

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

OUTAGE_S = 30.0
#: How often the test asks the API during the outage.
PROBE_EVERY_S = 1.0
SERVICE_NAMES = ("codity-api", "codity-worker", "codity-worker-listen", "codity-scheduler")


@pytest.fixture
def cluster() -> Iterator[OwnCluster]:
    with own_cluster() as c:
        yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def envelope_code(response: httpx.Response) -> str | None:
    """The error envelope's code, or None when the body is not the envelope."""
    try:
        body = response.json()
        code = body["error"]["code"]
        assert body["error"]["request_id"] == response.headers["x-request-id"]
        assert isinstance(body["error"]["message"], str)
        return str(code)
    except (ValueError, KeyError, TypeError, AssertionError):
        return None


async def test_a_30_second_outage_is_ridden_out_and_nothing_acknowledged_is_lost(
    cluster: OwnCluster, tmp_path: Path
) -> None:
    host, pg_port = cluster.url.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)
    async with running_cutter(host, int(pg_port)) as (cutter, proxy_port):
        await _outage(
            cluster, tmp_path, cutter, cluster.url.replace(f":{pg_port}/", f":{proxy_port}/")
        )


async def _outage(cluster: OwnCluster, tmp_path: Path, cutter: Cutter, api_db_url: str) -> None:
    port = free_port()
    procs = Procs(tmp=tmp_path, database_url=cluster.url)
    secrets_env = {
        "JWT_SECRET": secrets.token_urlsafe(32),
        "JWT_REFRESH_SECRET": secrets.token_urlsafe(32),
        # The API reaches PostgreSQL through the cutter, to lose a reply mid-request below.
        "DATABASE_URL": api_db_url,
    }
    api = procs.spawn("api", "--host", "127.0.0.1", "--port", str(port), env=secrets_env,
                      name="api")  # fmt: skip
    services = [
        api,
        procs.spawn("worker", "--capacity", "5", name="worker-1"),
        procs.spawn("worker", "--capacity", "5", name="worker-2"),
        procs.spawn("scheduler", name="scheduler"),
    ]
    db = await connect(cluster.url)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:

            async def ready() -> bool:
                try:
                    return (await http.get("/readyz")).status_code == 200
                except httpx.HTTPError:
                    return False

            await wait_for(ready, timeout_s=60, interval_s=0.2, what="the API to be ready")
            who = f"ops-{uuid.uuid4().hex[:8]}@example.test"
            token, project_id = await sign_up(
                http, db, email=who, password="a-long-enough-password", name="Ops",
                org_name="Outage",
            )  # fmt: skip
            headers = {"Authorization": f"Bearer {token}"}
            jobs_url = f"/api/v1/projects/{project_id}/jobs"
            queue_id = await make_queue(db, uuid.UUID(project_id), name="outage")

            acknowledged: list[int] = []

            async def enqueue_via_api(n: int) -> None:
                for _ in range(n):
                    r = await http.post(
                        jobs_url,
                        json={"queue": "outage", "handler": "sleep", "payload": {"seconds": 0.2}},
                        headers=headers,
                    )
                    assert r.status_code == 201, r.text
                    acknowledged.append(r.json()["id"])

            async def enqueue_directly(n: int, **job: Any) -> None:
                new = core.NewJob(handler="sleep", payload={"seconds": 0.2}, **job)
                acknowledged.extend(j.id for j in await core.enqueue_many(db, queue_id, [new] * n))

            await enqueue_via_api(20)
            await enqueue_directly(20)

            # A connection torn in the middle of a request (the reply to its statement lost, the
            # connection closed) answers 503 too, and the next request is served again.
            torn: list[tuple[int, str | None]] = []
            for _ in range(5):
                cuts = cutter.cuts
                cutter.arm_any()
                r = await http.get(jobs_url, headers=headers)
                assert r.status_code != 500, r.text
                if cutter.cuts > cuts and r.status_code == 503:
                    torn.append((r.status_code, envelope_code(r)))
                    break
            assert torn == [(503, "database_unavailable")], torn
            assert (await http.get(jobs_url, headers=headers)).status_code == 200

            async def some_in_flight() -> bool:
                # Leased to a worker: `claimed`, or `running` once the marker saw it run 0.1 s.
                # Not `running` alone: a 0.2 s job shows as running for a few milliseconds
                # (CI's poll missed every one of them).
                n = await db.fetchval(
                    "SELECT count(*) FROM jobs WHERE status IN ('claimed', 'running')"
                )
                return n > 0

            await wait_for(some_in_flight, what="jobs in flight when the database goes")
            # Due during the outage: only a scheduler that reconnected can promote it.
            await enqueue_directly(1, delay_s=2.0)
            await enqueue_directly(30)  # a backlog left queued across the outage
            await db.close()

            cluster.stop()
            down_at = time.monotonic()
            probes: dict[str, list[tuple[int, str | None]]] = {"readyz": [], "list": [], "post": []}
            while time.monotonic() - down_at < OUTAGE_S:
                for name, call in (
                    ("readyz", http.get("/readyz")),
                    ("list", http.get(jobs_url, headers=headers)),
                    ("post", http.post(jobs_url, json={"queue": "outage", "handler": "noop"},
                                       headers=headers)),
                ):  # fmt: skip
                    r = await call
                    probes[name].append((r.status_code, envelope_code(r)))
                assert (await http.get("/healthz")).status_code == 200  # the process is up
                for proc in services:
                    assert proc.poll() is None, f"{proc.args} died during the outage"
                await asyncio.sleep(PROBE_EVERY_S)
            cluster.start()
            up_at = time.monotonic()

            await wait_for(ready, timeout_s=30, interval_s=0.1, what="/readyz to recover")
            readyz_back_s = time.monotonic() - up_at
            db = await connect(cluster.url)
            await enqueue_via_api(10)  # the API serves again, with the token from before
            await enqueue_directly(10)

            async def all_completed() -> bool:
                n = await db.fetchval(
                    "SELECT count(*) FROM jobs WHERE id = ANY($1) AND status = 'completed'",
                    acknowledged,
                )
                return n == len(acknowledged)

            await wait_for(all_completed, timeout_s=60, interval_s=0.2,
                           what="every acknowledged job completed")  # fmt: skip
            settled_s = time.monotonic() - up_at

            async def reconnected() -> bool:
                names = {
                    r["application_name"]
                    for r in await db.fetch("SELECT application_name FROM pg_stat_activity")
                }
                return set(SERVICE_NAMES) <= names

            await wait_for(reconnected, timeout_s=30, what="every service's connections back")

        # While the database was away: every answer was the 503 envelope, never a 500.
        for name, seen in probes.items():
            assert seen, name
            assert set(seen) == {(503, "database_unavailable")}, (name, sorted(set(seen)))
        for proc in services:
            assert proc.poll() is None, f"{proc.args} exited after the outage"
        assert await db.fetchval("SELECT count(*) FROM dead_letter_jobs") == 0
        assert await db.fetchval("SELECT count(*) FROM jobs") == len(acknowledged)
        for name in ("worker-1", "worker-2", "scheduler"):
            log = procs.logs(next(p for label, p, _ in procs.started if label == name))
            assert "database unavailable" in log or "lost" in log, f"{name} never saw the outage"
        print(
            f"outage {OUTAGE_S:.0f} s: {sum(len(v) for v in probes.values())} API answers, all "
            f"503 database_unavailable; /readyz back {readyz_back_s:.1f} s after PostgreSQL; "
            f"{len(acknowledged)} acknowledged jobs all completed {settled_s:.1f} s after it"
        )
    except BaseException:
        print(procs.dump())
        raise
    finally:
        procs.stop_all()
        if not db.is_closed():
            await db.close()
