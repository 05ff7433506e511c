"""Rate limits kept in PostgreSQL: failed sign-ins per IP (IPv6 per /64) and a progressive
delay per account, the auth ceiling, and the enqueue quota (nothing past the limit is stored;
a bulk over it is refused whole)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from tests.api.conftest import API, PASSWORD, Session, login, make_settings

from codity.api import ratelimit
from codity.domain.errors import RateLimitedError
from codity.settings import Settings

ORG = uuid.uuid4()  # the organisation window is large here: these tests are about projects
BIG = 1_000_000


def client_from(app: FastAPI, ip: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(ip, 4321), raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


async def expire_windows(conn: asyncpg.Connection[Any]) -> None:
    """Fast-forward: every window ends now (instead of sleeping 15 minutes)."""
    await conn.execute("UPDATE rate_limit_buckets SET expires_at = now() - interval '1 second'")


async def test_sixth_failed_login_from_one_ip_is_429_even_with_the_right_password(
    client: httpx.AsyncClient,
    owner: Session,
    api_settings: Settings,
    api_db: asyncpg.Connection[Any],
) -> None:
    limit = api_settings.rate_limit_login_failures
    for _ in range(limit):
        r = await login(client, owner.email, "wrong password, try again")
        assert r.status_code == 401, r.text
    blocked = await login(client, owner.email, "wrong password, try again")
    assert blocked.status_code == 429
    assert blocked.json()["error"]["code"] == "rate_limited"
    retry_after = int(blocked.headers["Retry-After"])
    assert 0 < retry_after <= api_settings.rate_limit_login_window_s
    # The right password does not get through either until the window passes.
    correct = await login(client, owner.email, PASSWORD)
    assert correct.status_code == 429
    await expire_windows(api_db)
    assert (await login(client, owner.email, PASSWORD)).status_code == 200


async def test_failures_per_account_slow_guessing_down_but_never_lock_the_owner_out(
    app: FastAPI, client: httpx.AsyncClient, owner: Session, api_settings: Settings,
    api_db: asyncpg.Connection[Any],
) -> None:  # fmt: skip
    free = api_settings.rate_limit_login_failures
    # A distributed guesser: every attempt from another address (no per-IP limit applies).
    for i in range(free + 3):
        async with client_from(app, f"10.0.{i}.1") as c:
            r = await login(c, owner.email, "wrong password, again")
            assert r.status_code in (401, 429), r.text
    async with client_from(app, "10.9.9.9") as fresh_ip:
        # Right after a failure past the free ones, the account waits (1, 2, 4 s... capped)...
        waiting = await login(fresh_ip, owner.email, PASSWORD)
        assert waiting.status_code == 429
        assert 1 <= int(waiting.headers["Retry-After"]) <= api_settings.login_max_delay_s
        # ...and once that wait is over the owner's right password works: no lock-out.
        await api_db.execute("UPDATE login_throttles SET next_attempt_at = now()")
        assert (await login(fresh_ip, owner.email, PASSWORD)).status_code == 200
        # Another account from that IP is unaffected.
        assert (
            await login(fresh_ip, "someone-else@example.com", "whatever it is")
        ).status_code == 401


async def test_the_per_account_delay_doubles_up_to_its_cap(
    app: FastAPI, owner: Session, api_settings: Settings, api_db: asyncpg.Connection[Any]
) -> None:
    waits = []
    for i in range(api_settings.rate_limit_login_failures + 8):
        await api_db.execute("UPDATE login_throttles SET next_attempt_at = now()")
        async with client_from(app, f"10.1.{i}.1") as c:
            assert (await login(c, owner.email, "a wrong guess")).status_code == 401
        waits.append(
            await api_db.fetchval(
                "SELECT round(extract(epoch FROM next_attempt_at - now())) FROM login_throttles"
            )
        )
    free = api_settings.rate_limit_login_failures
    assert [int(w) for w in waits[:free]] == [0] * free
    assert [int(w) for w in waits[free:]] == [1, 2, 4, 8, 16, 32, 60, 60]


async def test_ipv6_clients_are_counted_per_64(
    app: FastAPI, owner: Session, api_settings: Settings
) -> None:
    """One subscriber holds a whole /64: rotating addresses inside it is one source."""
    for i in range(api_settings.rate_limit_login_failures):
        async with client_from(app, f"2001:db8:1:2::{i + 1:x}") as c:
            assert (await login(c, f"nobody-{i}@example.com", "not a password")).status_code == 401
    async with client_from(app, "2001:db8:1:2:ffff::9") as same_64:
        assert (await login(same_64, owner.email, PASSWORD)).status_code == 429
    async with client_from(app, "2001:db8:1:3::1") as next_64:
        assert (await login(next_64, owner.email, PASSWORD)).status_code == 200


async def test_failures_count_per_ip_across_accounts(
    app: FastAPI, client: httpx.AsyncClient, owner: Session, api_settings: Settings
) -> None:
    async with client_from(app, "192.0.2.7") as c:
        for i in range(api_settings.rate_limit_login_failures):
            assert (await login(c, f"nobody-{i}@example.com", "not a password")).status_code == 401
        assert (await login(c, owner.email, PASSWORD)).status_code == 429
    async with client_from(app, "192.0.2.8") as other_ip:
        assert (await login(other_ip, owner.email, PASSWORD)).status_code == 200


async def test_auth_ceiling_per_ip(
    app: FastAPI, client: httpx.AsyncClient, owner: Session, database_url: str
) -> None:
    app.state.settings = make_settings(database_url, RATE_LIMIT_AUTH_PER_MINUTE=3)
    resend = {"email": "nobody@example.com"}
    async with client_from(app, "198.51.100.1") as c:
        for _ in range(3):
            r = await c.post(f"{API}/auth/verify/resend", json=resend)
            assert r.status_code == 202
        r = await c.post(f"{API}/auth/verify/resend", json=resend)
        assert r.status_code == 429
        assert int(r.headers["Retry-After"]) <= 60
        # Refreshing is not under the ceiling: every dashboard page load refreshes.
        assert (await c.post(f"{API}/auth/refresh")).status_code == 401
    async with client_from(app, "198.51.100.2") as other:
        assert (await other.post(f"{API}/auth/verify/resend", json=resend)).status_code == 202


async def test_enqueue_quota_refuses_whole_requests_and_consumes_nothing_when_refused(
    pool: asyncpg.Pool[Any],
) -> None:
    project = uuid.uuid4()
    await ratelimit.check_enqueue_quota(pool, project, ORG, 6, limit=10, org_limit=BIG)
    with pytest.raises(RateLimitedError) as refused:
        await ratelimit.check_enqueue_quota(
            pool, project, ORG, 5, limit=10, org_limit=BIG
        )  # 11 > 10: refused whole
    assert refused.value.retry_after_s >= 1
    await ratelimit.check_enqueue_quota(
        pool, project, ORG, 4, limit=10, org_limit=BIG
    )  # the refusal took nothing
    with pytest.raises(RateLimitedError):
        await ratelimit.check_enqueue_quota(pool, project, ORG, 1, limit=10, org_limit=BIG)
    with pytest.raises(RateLimitedError):
        await ratelimit.check_enqueue_quota(
            pool, uuid.uuid4(), ORG, 11, limit=10, org_limit=BIG
        )  # never fits


async def test_enqueue_quota_is_exact_under_concurrency(pool: asyncpg.Pool[Any]) -> None:
    project = uuid.uuid4()

    async def one() -> bool:
        try:
            await ratelimit.check_enqueue_quota(pool, project, ORG, 1, limit=25, org_limit=BIG)
        except RateLimitedError:
            return False
        return True

    results = await asyncio.gather(*(one() for _ in range(60)))
    assert sum(results) == 25


async def test_a_new_window_starts_after_expiry(pool: asyncpg.Pool[Any]) -> None:
    project = uuid.uuid4()
    await ratelimit.check_enqueue_quota(pool, project, ORG, 3, limit=3, org_limit=BIG)
    with pytest.raises(RateLimitedError):
        await ratelimit.check_enqueue_quota(pool, project, ORG, 1, limit=3, org_limit=BIG)
    await pool.execute("UPDATE rate_limit_buckets SET expires_at = now() - interval '1 second'")
    await ratelimit.check_enqueue_quota(pool, project, ORG, 3, limit=3, org_limit=BIG)


async def test_enqueue_route_stops_at_the_limit_and_stores_nothing_past_it(
    app: FastAPI,
    client: httpx.AsyncClient,
    owner: Session,
    api_db: asyncpg.Connection[Any],
    database_url: str,
) -> None:
    from tests.factories import make_queue

    limit = 5
    app.state.settings = make_settings(database_url, RATE_LIMIT_ENQUEUE_PER_MINUTE=limit)
    queue_id = await make_queue(api_db, owner.project_id, name="mail")
    url = f"{API}/projects/{owner.project_id}/jobs"
    for _ in range(limit - 2):
        r = await client.post(url, json={"queue": "mail", "handler": "noop"}, headers=owner.headers)
        assert r.status_code == 201, r.text
    bulk = {"queue": "mail", "jobs": [{"handler": "noop"}] * 3}
    r = await client.post(f"{url}/bulk", json=bulk, headers=owner.headers)
    assert r.status_code == 429  # 3 + 3 > 5: refused whole
    assert "Retry-After" in r.headers
    for _ in range(2):
        r = await client.post(url, json={"queue": "mail", "handler": "noop"}, headers=owner.headers)
        assert r.status_code == 201
    r = await client.post(url, json={"queue": "mail", "handler": "noop"}, headers=owner.headers)
    assert r.status_code == 429
    assert await api_db.fetchval("SELECT count(*) FROM jobs WHERE queue_id = $1", queue_id) == limit


async def test_expired_windows_are_pruned(pool: asyncpg.Pool[Any]) -> None:
    live, old = uuid.uuid4(), uuid.uuid4()
    await ratelimit.check_enqueue_quota(pool, live, ORG, 1, limit=5, org_limit=BIG)
    await ratelimit.check_enqueue_quota(pool, old, ORG, 1, limit=5, org_limit=BIG)
    await pool.execute(
        "UPDATE rate_limit_buckets SET expires_at = now() - interval '2 minutes' WHERE key LIKE $1",
        f"%{old}",
    )
    assert await ratelimit.prune_expired(pool) == 1
    keys = {r["key"] for r in await pool.fetch("SELECT key FROM rate_limit_buckets")}
    assert keys == {f"enqueue:project:{live}", f"enqueue:org:{ORG}"}


async def test_the_api_process_prunes_windows_on_its_loop_service(pool: asyncpg.Pool[Any]) -> None:
    """The API's pruner is a LoopService: its first round prunes at start, and it stops
    between rounds when asked (the lifespan's shutdown)."""
    old = uuid.uuid4()
    await ratelimit.check_enqueue_quota(pool, old, ORG, 1, limit=5, org_limit=BIG)
    await pool.execute("UPDATE rate_limit_buckets SET expires_at = now() - interval '2 minutes'")
    stop = asyncio.Event()
    pruner = ratelimit.WindowPruner(pool)
    task = asyncio.create_task(pruner.run(stop))
    for _ in range(200):
        if pruner.iterations:
            break
        await asyncio.sleep(0.01)
    assert pruner.iterations == 1
    assert await pool.fetchval("SELECT count(*) FROM rate_limit_buckets") == 0
    stop.set()
    await asyncio.wait_for(task, timeout=5)


async def test_parallel_guesses_cannot_overtake_the_failure_count(
    client: httpx.AsyncClient, owner: Session, api_settings: Settings
) -> None:
    # Each attempt is reserved before the password is checked; checking first and recording
    # the failure after would let every one of these through to the password check.
    attempts = 4 * api_settings.rate_limit_login_failures
    results = await asyncio.gather(
        *(login(client, owner.email, f"guess number {i} is wrong") for i in range(attempts))
    )
    statuses = sorted(r.status_code for r in results)
    assert statuses.count(401) == api_settings.rate_limit_login_failures
    assert statuses.count(429) == attempts - api_settings.rate_limit_login_failures


async def test_successful_sign_ins_do_not_count_as_failures(
    client: httpx.AsyncClient, owner: Session, api_settings: Settings
) -> None:
    for _ in range(api_settings.rate_limit_login_failures + 2):
        assert (await login(client, owner.email, PASSWORD)).status_code == 200
    assert (await login(client, owner.email, "one wrong guess here")).status_code == 401
    assert (await login(client, owner.email, PASSWORD)).status_code == 200
