"""Register and verify, login, me, refresh rotation with family revocation, logout, switch-org.
(The security findings' own tests are in tests/security/.)"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import replace
from typing import Any

import asyncpg
import httpx
import jwt
from tests.api.conftest import (
    API,
    PASSWORD,
    Mailbox,
    Session,
    login,
    refresh_headers,
    register_and_login,
    session_from,
    unique_email,
)
from tests.factories import make_membership

from codity.api.cookies import REFRESH_COOKIE
from codity.settings import Settings


async def test_register_creates_owner_org_and_default_project(
    client: httpx.AsyncClient, owner: Session
) -> None:
    r = await client.get(f"{API}/auth/me", headers=owner.headers)
    assert r.status_code == 200, r.text
    me = r.json()
    assert me["user"]["email"] == owner.email
    assert me["role"] == "owner"
    assert me["org"]["id"] == str(owner.org_id)
    assert [p["id"] for p in me["projects"]] == [str(owner.project_id)]
    assert [(m["org"]["id"], m["role"]) for m in me["memberships"]] == [
        (str(owner.org_id), "owner")
    ]


async def test_access_token_claims(client: httpx.AsyncClient, owner: Session, api_settings) -> None:  # type: ignore[no-untyped-def]
    claims = jwt.decode(owner.access_token, api_settings.jwt_secret, algorithms=["HS256"])
    assert claims["sub"] == str(owner.user_id)
    assert claims["org"] == str(owner.org_id)
    assert claims["role"] == "owner"
    assert claims["type"] == "access"
    assert claims["exp"] - claims["iat"] == api_settings.access_token_ttl_s
    assert claims["jti"]


async def test_register_verify_then_sign_in(
    client: httpx.AsyncClient, mailbox: Mailbox, api_db: asyncpg.Connection[Any]
) -> None:
    email = unique_email("new")
    r = await client.post(
        f"{API}/auth/register",
        json={"email": email, "password": PASSWORD, "name": "New", "org_name": "New Org"},
    )
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "verification_sent"
    # Not verified yet: the right password is answered "confirm your email first".
    early = await login(client, email)
    assert early.status_code == 403
    assert early.json()["error"]["code"] == "email_not_verified"
    token = mailbox.last_token(email)
    verified = await client.post(f"{API}/auth/verify", json={"token": token})
    assert verified.status_code == 200, verified.text
    assert verified.json() == {"email": email, "verified": True}
    ok = await login(client, email)
    assert ok.status_code == 200, ok.text
    me = (
        await client.get(
            f"{API}/auth/me", headers={"Authorization": "Bearer " + ok.json()["access_token"]}
        )
    ).json()
    assert me["user"]["email_verified"] is True
    assert me["role"] == "owner"
    assert [p["slug"] for p in me["projects"]] == ["default"]


async def test_a_verification_link_works_once(client: httpx.AsyncClient, mailbox: Mailbox) -> None:
    email = unique_email("once")
    await client.post(
        f"{API}/auth/register",
        json={"email": email, "password": PASSWORD, "name": "x", "org_name": "y"},
    )
    token = mailbox.last_token(email)
    assert (await client.post(f"{API}/auth/verify", json={"token": token})).status_code == 200
    again = await client.post(f"{API}/auth/verify", json={"token": token})
    assert again.status_code == 422
    assert again.json()["error"]["code"] == "invalid_verification_token"
    resent = await client.post(f"{API}/auth/verify/resend", json={"email": email})
    assert resent.status_code == 202
    assert len(mailbox.messages(email)) == 1  # verified: nothing more is sent


async def test_short_password_is_refused_with_field_path(client: httpx.AsyncClient) -> None:
    r = await client.post(
        f"{API}/auth/register",
        json={"email": unique_email(), "password": "short", "name": "x", "org_name": "y"},
    )
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "validation_error"
    assert ["body", "password"] in [d["loc"] for d in err["details"]]


async def test_login_and_wrong_password(client: httpx.AsyncClient, owner: Session) -> None:
    ok = await login(client, owner.email)
    assert ok.status_code == 200, ok.text
    body = ok.json()
    assert set(body) == {"access_token", "token_type", "expires_in", "csrf_token"}
    assert body["token_type"] == "bearer"
    assert ok.cookies.get(REFRESH_COOKIE)
    bad = await login(client, owner.email, "not the password at all")
    assert bad.status_code == 401
    assert bad.json()["error"]["code"] == "invalid_credentials"
    unknown = await login(client, unique_email(), PASSWORD)
    assert unknown.status_code == 401
    assert unknown.json()["error"]["code"] == "invalid_credentials"


async def test_me_without_or_with_bad_token_is_401(client: httpx.AsyncClient) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"}):
        r = await client.get(f"{API}/auth/me", headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthorized"


async def test_token_signed_with_another_secret_is_refused(
    client: httpx.AsyncClient, owner: Session
) -> None:
    claims = jwt.decode(owner.access_token, options={"verify_signature": False})
    forged = jwt.encode(claims, "not-the-server-secret-but-long-enough-32", algorithm="HS256")
    r = await client.get(f"{API}/auth/me", headers={"Authorization": f"Bearer {forged}"})
    assert r.status_code == 401


async def _refresh(client: httpx.AsyncClient, session: Session) -> httpx.Response:
    r = await client.post(f"{API}/auth/refresh", headers=refresh_headers(session))
    client.cookies.clear()
    return r


def _rotated(session: Session, r: httpx.Response) -> Session:
    return replace(
        session,
        access_token=r.json()["access_token"],
        refresh_token=r.cookies[REFRESH_COOKIE],
        csrf_token=r.json()["csrf_token"],
    )


async def test_refresh_rotates_and_replay_revokes_the_family(
    client: httpx.AsyncClient, owner: Session
) -> None:
    r1 = await _refresh(client, owner)
    assert r1.status_code == 200, r1.text
    second = _rotated(owner, r1)
    assert second.refresh_token != owner.refresh_token
    assert second.csrf_token == owner.csrf_token  # bound to the family, not to one token
    # The new access token works.
    me = await client.get(f"{API}/auth/me", headers=second.headers)
    assert me.status_code == 200

    # Replaying the rotated token: refused, and the whole family is revoked...
    replay = await _refresh(client, owner)
    assert replay.status_code == 401
    assert replay.json()["error"]["code"] == "refresh_token_reused"
    # ...so the newest token of the family stops working too.
    after = await _refresh(client, second)
    assert after.status_code == 401
    assert after.json()["error"]["code"] == "invalid_refresh_token"


async def test_replay_does_not_touch_other_sign_ins(
    client: httpx.AsyncClient, owner: Session
) -> None:
    r = await login(client, owner.email)
    other = session_from(r, user_id=owner.user_id, email=owner.email, org_id=owner.org_id,
                         project_id=owner.project_id, client=client)  # fmt: skip
    assert (await _refresh(client, owner)).status_code == 200
    await _refresh(client, owner)  # replay: revokes owner's family only
    assert (await _refresh(client, other)).status_code == 200


async def test_logout_revokes_the_family_and_clears_the_cookies(
    client: httpx.AsyncClient, owner: Session
) -> None:
    r = await client.post(f"{API}/auth/logout", headers=refresh_headers(owner))
    assert r.status_code == 204
    cleared = r.headers.get_list("set-cookie")
    assert any(c.startswith(f"{REFRESH_COOKIE}=") and "Max-Age=0" in c for c in cleared)
    client.cookies.clear()
    assert (await _refresh(client, owner)).status_code == 401


async def test_refresh_tokens_are_stored_as_a_keyed_hash(
    client: httpx.AsyncClient,
    owner: Session,
    api_db: asyncpg.Connection[Any],
    api_settings: Settings,
) -> None:
    rows = await api_db.fetch(
        "SELECT token_hash FROM refresh_tokens WHERE user_id = $1", owner.user_id
    )
    stored = {bytes(r["token_hash"]) for r in rows}
    keyed = hmac.new(
        api_settings.jwt_refresh_secret.encode(), owner.refresh_token.encode(), hashlib.sha256
    ).digest()
    assert keyed in stored
    assert hashlib.sha256(owner.refresh_token.encode()).digest() not in stored
    dump = str(await api_db.fetch("SELECT * FROM refresh_tokens"))
    assert owner.refresh_token not in dump


async def test_switch_org(client: httpx.AsyncClient, owner: Session, api_db) -> None:  # type: ignore[no-untyped-def]
    second = await register_and_login(client, api_db, org_name="Second")
    await make_membership(api_db, second.org_id, owner.user_id, "viewer")
    r = await client.post(
        f"{API}/auth/switch-org", json={"org_id": str(second.org_id)}, headers=owner.headers
    )
    assert r.status_code == 200, r.text
    token = r.json()["access_token"]
    me = (await client.get(f"{API}/auth/me", headers={"Authorization": f"Bearer {token}"})).json()
    assert me["org"]["id"] == str(second.org_id)
    assert me["role"] == "viewer"
    assert len(me["memberships"]) == 2
    # Refreshing keeps the org the refresh token was issued for.
    switched = _rotated(owner, r)
    client.cookies.clear()
    refreshed = await _refresh(client, switched)
    claims = jwt.decode(refreshed.json()["access_token"], options={"verify_signature": False})
    assert claims["org"] == str(second.org_id)
    # Not a member: 404, not 403.
    stranger = await register_and_login(client, api_db, org_name="Third")
    r = await client.post(
        f"{API}/auth/switch-org", json={"org_id": str(stranger.org_id)}, headers=owner.headers
    )
    assert r.status_code == 404
