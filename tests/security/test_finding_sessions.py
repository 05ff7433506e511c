"""Medium 6 — the 7-day refresh token sat in localStorage.

Now: the refresh token is an httpOnly, SameSite=Strict cookie scoped to /api/v1/auth, never in a
response body; calls carried by it need the CSRF header; the access token lives in the
dashboard's memory only (browser suite); a password change and "sign out everywhere" revoke
every refresh family and refuse access tokens issued before them (`sessions_valid_after`,
checked on every request); refresh refuses inactive accounts. Low: JWT_REFRESH_SECRET is used
(it keys the stored hash of every refresh token and the CSRF token).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import asyncpg
import httpx
from tests.api.conftest import (
    API,
    PASSWORD,
    Session,
    login,
    make_settings,
    refresh_headers,
    session_from,
)

from codity.api.cookies import CSRF_COOKIE, CSRF_HEADER, REFRESH_COOKIE
from codity.settings import Settings


def _cookie(r: httpx.Response, name: str) -> str:
    return next(c for c in r.headers.get_list("set-cookie") if c.startswith(f"{name}="))


async def _refresh(client: httpx.AsyncClient, session: Session, **kw: Any) -> httpx.Response:
    r = await client.post(f"{API}/auth/refresh", headers=refresh_headers(session, **kw))
    client.cookies.clear()
    return r


async def test_the_refresh_token_is_only_an_httponly_strict_cookie_on_the_auth_path(
    client: httpx.AsyncClient, owner: Session
) -> None:
    """Break it: put the refresh token back in the sign-in answer, or drop a cookie flag."""
    r = await login(client, owner.email)
    assert "refresh" not in r.text  # not in the body, under any name
    refresh = _cookie(r, REFRESH_COOKIE).lower()
    assert "httponly" in refresh
    assert "samesite=strict" in refresh
    assert "path=/api/v1/auth" in refresh
    csrf = _cookie(r, CSRF_COOKIE).lower()
    assert "httponly" not in csrf  # the dashboard reads it to send the header
    assert "samesite=strict" in csrf


async def test_cookies_are_secure_over_https_and_in_production(
    client: httpx.AsyncClient, owner: Session, app: Any, database_url: str
) -> None:
    assert "secure" not in _cookie(await login(client, owner.email), REFRESH_COOKIE).lower()
    app.state.settings = make_settings(
        database_url, CODITY_ENV="production", JWT_SECRET="p" * 40, JWT_REFRESH_SECRET="q" * 40
    )
    r = await login(client, owner.email)
    assert "secure" in _cookie(r, REFRESH_COOKIE).lower()
    assert "secure" in _cookie(r, CSRF_COOKIE).lower()


async def test_the_refresh_cookie_alone_is_refused_without_its_csrf_token(
    client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any]
) -> None:
    """What a cross-site request could do with the cookie: nothing. Break it: skip the
    csrf_matches check in refresh (and logout)."""
    for csrf in ("", "forged-token", owner.csrf_token[:-2] + "xx"):
        r = await _refresh(client, owner, csrf=csrf)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "csrf_failed"
        r = await client.post(f"{API}/auth/logout", headers=refresh_headers(owner, csrf=csrf))
        assert r.status_code == 403
    # Nothing rotated or revoked: the real client carries on.
    rows = await api_db.fetch(
        "SELECT rotated_at, revoked_at FROM refresh_tokens WHERE user_id = $1", owner.user_id
    )
    assert all(r["rotated_at"] is None and r["revoked_at"] is None for r in rows)
    assert (await _refresh(client, owner)).status_code == 200


async def test_a_password_change_ends_every_session_at_once(
    client: httpx.AsyncClient, owner: Session
) -> None:
    """Break it: stop checking sessions_valid_after in `authenticate` (old access tokens keep
    working for their 15 minutes) or stop revoking the families (old refresh cookies work)."""
    r = await login(client, owner.email)
    laptop = session_from(r, user_id=owner.user_id, email=owner.email, org_id=owner.org_id,
                          project_id=owner.project_id, client=client)  # fmt: skip
    changed = await client.post(
        f"{API}/auth/password",
        json={"current_password": PASSWORD, "new_password": "a brand new password"},
        headers=owner.headers,
    )
    assert changed.status_code == 200, changed.text
    here = replace(
        owner,
        access_token=changed.json()["access_token"],
        refresh_token=changed.cookies[REFRESH_COOKIE],
        csrf_token=changed.json()["csrf_token"],
    )
    client.cookies.clear()
    for old in (owner, laptop):
        me = await client.get(f"{API}/auth/me", headers=old.headers)
        assert me.status_code == 401
        assert me.json()["error"]["code"] == "session_revoked"
        assert (await _refresh(client, old)).status_code == 401
    # The session the change started works; the old password does not.
    assert (await client.get(f"{API}/auth/me", headers=here.headers)).status_code == 200
    assert (await _refresh(client, here)).status_code == 200
    assert (await login(client, owner.email)).status_code == 401
    assert (await login(client, owner.email, "a brand new password")).status_code == 200


async def test_a_wrong_current_password_changes_nothing(
    client: httpx.AsyncClient, owner: Session
) -> None:
    r = await client.post(
        f"{API}/auth/password",
        json={"current_password": "not it at all", "new_password": "a brand new password"},
        headers=owner.headers,
    )
    assert r.status_code == 401
    assert (await client.get(f"{API}/auth/me", headers=owner.headers)).status_code == 200


async def test_sign_out_everywhere(client: httpx.AsyncClient, owner: Session) -> None:
    r = await login(client, owner.email)
    other = session_from(r, user_id=owner.user_id, email=owner.email, org_id=owner.org_id,
                         project_id=owner.project_id, client=client)  # fmt: skip
    out = await client.post(f"{API}/auth/logout-all", headers=owner.headers)
    assert out.status_code == 204
    assert any("Max-Age=0" in c for c in out.headers.get_list("set-cookie"))
    client.cookies.clear()
    for session in (owner, other):
        assert (await client.get(f"{API}/auth/me", headers=session.headers)).status_code == 401
        assert (await _refresh(client, session)).status_code == 401
    # A new sign-in works at once (the cut-off is not in the future).
    fresh = await login(client, owner.email)
    me = await client.get(
        f"{API}/auth/me", headers={"Authorization": f"Bearer {fresh.json()['access_token']}"}
    )
    assert me.status_code == 200


async def test_refresh_refuses_a_deactivated_account(
    client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any]
) -> None:
    """Break it: drop the account check from api_sessions_lock / refresh."""
    await api_db.execute("UPDATE users SET is_active = false WHERE id = $1", owner.user_id)
    r = await _refresh(client, owner)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "invalid_refresh_token"
    await api_db.execute("UPDATE users SET is_active = true WHERE id = $1", owner.user_id)
    assert (await _refresh(client, owner)).status_code == 401  # the family was revoked


async def test_jwt_refresh_secret_keys_the_sessions(
    client: httpx.AsyncClient, owner: Session, app: Any, database_url: str,
    api_db: asyncpg.Connection[Any], api_settings: Settings,
) -> None:  # fmt: skip
    """Low: JWT_REFRESH_SECRET is used, not just required. A database alone cannot be turned
    into sessions: a row planted for a token the attacker chose is no session (even with the
    right CSRF token), and under another secret every stored token is unknown. Break it: hash
    refresh tokens with plain SHA-256 again, and both refreshes below succeed."""
    import hashlib
    import uuid

    from codity.api.tokens import csrf_token

    family = uuid.uuid4()
    forged = f"{owner.org_id.hex}.attacker-chosen-token"
    await api_db.execute(
        """INSERT INTO refresh_tokens (user_id, family_id, token_hash, expires_at)
           VALUES ($1, $2, $3, now() + interval '1 day')""",
        owner.user_id,
        family,
        hashlib.sha256(forged.encode()).digest(),
    )
    planted = replace(owner, refresh_token=forged, csrf_token=csrf_token(api_settings, family))
    assert (await _refresh(client, planted)).status_code == 401
    other = make_settings(database_url, JWT_REFRESH_SECRET="another-" + "z" * 40)
    app.state.settings = other
    owner_family = await api_db.fetchval(
        "SELECT family_id FROM refresh_tokens WHERE user_id = $1 AND family_id <> $2 LIMIT 1",
        owner.user_id,
        family,
    )
    rekeyed = replace(owner, csrf_token=csrf_token(other, owner_family))
    assert (await _refresh(client, rekeyed)).status_code == 401


async def test_the_csrf_header_is_allowed_by_cors(
    client: httpx.AsyncClient, api_settings: Settings
) -> None:
    origin = api_settings.cors_origin_list[0]
    r = await client.options(
        f"{API}/auth/refresh",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": CSRF_HEADER,
        },
    )
    assert r.status_code == 200
    # No credentials mode: another origin's page cannot make the browser send the cookie.
    assert r.headers.get("access-control-allow-credentials") is None
