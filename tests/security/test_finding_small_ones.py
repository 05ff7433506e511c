"""The Low findings that are small pieces of their own: `codity db demo` in production, the
development secret file, sign-in throttling that cannot lock anyone out.

(Elsewhere, each with its own break-it note: the dashboard proxy's forwarding headers in
tests/e2e/test_web_server.py, SSRF in tests/security/test_finding_ssrf.py, payload masking in
tests/security/test_finding_masking.py, registration's answer in
test_finding_membership_by_email.py, JWT_REFRESH_SECRET in test_finding_sessions.py.)
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from tests.api.conftest import PASSWORD, Session, login, make_settings

from codity.cli.api import server_config
from codity.settings import INSECURE_SECRET_PREFIX, _dev_secret, get_settings
from codity.settings import Settings as AppSettings


def test_codity_db_demo_refuses_production(tmp_path: Path) -> None:
    """It drops every table, then creates accounts whose password is published. Break it:
    remove the environment check from demo_command (the command then tries to reach the
    database and fails differently, or worse, succeeds)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DATABASE"))}
    env.update(
        {
            "CODITY_ENV": "production",
            "JWT_SECRET": "p" * 40,
            "JWT_REFRESH_SECRET": "q" * 40,
            "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        }
    )
    result = subprocess.run(
        [sys.executable, "-m", "codity", "db", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "refused with CODITY_ENV=production" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_the_development_secret_is_private_from_its_first_byte(tmp_path: Path) -> None:
    """0600 whatever the umask, and never readable half-written. Break it: write the file
    with path.write_text() and chmod after (a window where it is world-readable under umask
    022), and this fails."""
    old = os.umask(0o000)  # the worst umask: a plain write_text would give 0666
    try:
        value = _dev_secret("jwt_secret", tmp_path / "secrets")
    finally:
        os.umask(old)
    path = tmp_path / "secrets" / "jwt_secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "secrets").stat().st_mode) & 0o077 == 0
    assert path.read_text() == value
    assert value.startswith(INSECURE_SECRET_PREFIX)
    assert list((tmp_path / "secrets").iterdir()) == [path]  # no temporary file left behind


def test_services_starting_together_agree_on_one_secret(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    with ThreadPoolExecutor(max_workers=8) as pool:
        values = list(pool.map(lambda _: _dev_secret("jwt_refresh_secret", folder), range(32)))
    assert len(set(values)) == 1
    assert (folder / "jwt_refresh_secret").read_text() == values[0]


async def test_nobody_can_lock_an_account_out_by_failing_its_sign_in(
    app: FastAPI, owner: Session, api_settings: AppSettings, api_db: asyncpg.Connection[Any]
) -> None:
    """Before: 5 failures per account per 15 minutes, from anywhere, locked the owner out for
    15 minutes. Now: a progressive delay (1 s, 2 s... up to LOGIN_MAX_DELAY_S) after the free
    failures. Break it: replace api_login_throttle_reserve with the old per-account window
    (`consume(... login-fail:account ...)`) and the owner's sign-in below is refused."""
    for i in range(api_settings.rate_limit_login_failures * 4):
        transport = httpx.ASGITransport(app=app, client=(f"10.{i}.0.1", 4321))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as attacker:
            await login(attacker, owner.email, "guess after guess")
    wait = await api_db.fetchval(
        "SELECT extract(epoch FROM next_attempt_at - clock_timestamp()) FROM login_throttles"
    )
    assert wait <= api_settings.login_max_delay_s
    await api_db.execute("UPDATE login_throttles SET next_attempt_at = clock_timestamp()")
    transport = httpx.ASGITransport(app=app, client=("192.0.2.50", 4321))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as the_owner:
        assert (await login(the_owner, owner.email, PASSWORD)).status_code == 200


async def test_the_api_believes_forwarding_headers_only_from_its_trusted_proxies(
    database_url: str, api_db: asyncpg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app `codity api` serves (its uvicorn configuration, loaded as uvicorn loads it)
    takes the client address from X-Forwarded-For only when the peer is one of
    TRUSTED_PROXIES; anyone else would otherwise choose their own rate-limit bucket and audit
    address. Break it: drop `forwarded_allow_ips` from server_config (uvicorn then trusts
    127.0.0.1 alone, whatever TRUSTED_PROXIES says)."""
    proxy = "192.0.2.10"
    settings = make_settings(database_url, TRUSTED_PROXIES=proxy)
    for name, value in {
        "CODITY_ENV": "test",
        "DATABASE_URL": database_url,
        "JWT_SECRET": settings.jwt_secret,
        "JWT_REFRESH_SECRET": settings.jwt_refresh_secret,
        "TRUSTED_PROXIES": proxy,
        "RATE_LIMIT_AUTH_PER_MINUTE": "10000",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        config = server_config(settings)
        config.load()
        app = config.loaded_app
        async with LifespanManager(app):
            for peer, forwarded in ((proxy, "198.51.100.4"), ("203.0.113.7", "6.6.6.6")):
                transport = httpx.ASGITransport(app=app, client=(peer, 4321))
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                    r = await c.post(
                        "/api/v1/auth/login",
                        json={"email": "nobody@example.com", "password": "not the password"},
                        headers={"X-Forwarded-For": forwarded},
                    )
                    assert r.status_code == 401, r.text
    finally:
        get_settings.cache_clear()
    counted = await api_db.fetch(
        "SELECT key FROM rate_limit_buckets WHERE key LIKE 'login-fail:ip:%' ORDER BY key"
    )
    # The proxy's word is taken for its client; the stranger is counted as themselves.
    assert [r["key"] for r in counted] == [
        "login-fail:ip:198.51.100.4",
        "login-fail:ip:203.0.113.7",
    ]
