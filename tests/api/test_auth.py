"""Register, login, me, refresh rotation with family revocation, logout, switch-org."""

from __future__ import annotations

import httpx
import jwt
from tests.api.conftest import API, PASSWORD, Session, login, register_and_login, unique_email
from tests.factories import make_membership


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


async def test_register_twice_is_email_taken_and_writes_nothing(
    client: httpx.AsyncClient, owner: Session, api_db
) -> None:  # type: ignore[no-untyped-def]
    count = "SELECT (SELECT count(*) FROM organizations), (SELECT count(*) FROM projects)"
    before = tuple(await api_db.fetchrow(count))
    r = await client.post(
        f"{API}/auth/register",
        json={"email": owner.email.upper(), "password": PASSWORD, "name": "x", "org_name": "y"},
    )
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "email_taken"
    assert tuple(await api_db.fetchrow(count)) == before  # one transaction: no orphan org


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
    assert set(body) == {"access_token", "refresh_token", "token_type", "expires_in"}
    assert body["token_type"] == "bearer"
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


async def test_refresh_rotates_and_replay_revokes_the_family(
    client: httpx.AsyncClient, owner: Session
) -> None:
    first = owner.refresh_token
    r1 = await client.post(f"{API}/auth/refresh", json={"refresh_token": first})
    assert r1.status_code == 200, r1.text
    second = r1.json()["refresh_token"]
    assert second != first
    # The new access token works.
    me = await client.get(
        f"{API}/auth/me", headers={"Authorization": f"Bearer {r1.json()['access_token']}"}
    )
    assert me.status_code == 200

    # Replaying the rotated token: refused, and the whole family is revoked...
    replay = await client.post(f"{API}/auth/refresh", json={"refresh_token": first})
    assert replay.status_code == 401
    assert replay.json()["error"]["code"] == "refresh_token_reused"
    # ...so the newest token of the family stops working too.
    after = await client.post(f"{API}/auth/refresh", json={"refresh_token": second})
    assert after.status_code == 401
    assert after.json()["error"]["code"] == "invalid_refresh_token"


async def test_replay_does_not_touch_other_sign_ins(
    client: httpx.AsyncClient, owner: Session
) -> None:
    other = (await login(client, owner.email)).json()["refresh_token"]
    r1 = await client.post(f"{API}/auth/refresh", json={"refresh_token": owner.refresh_token})
    assert r1.status_code == 200
    await client.post(f"{API}/auth/refresh", json={"refresh_token": owner.refresh_token})
    still = await client.post(f"{API}/auth/refresh", json={"refresh_token": other})
    assert still.status_code == 200


async def test_logout_revokes_the_family(client: httpx.AsyncClient, owner: Session) -> None:
    r = await client.post(f"{API}/auth/logout", json={"refresh_token": owner.refresh_token})
    assert r.status_code == 204
    again = await client.post(f"{API}/auth/refresh", json={"refresh_token": owner.refresh_token})
    assert again.status_code == 401


async def test_refresh_tokens_are_stored_hashed(
    client: httpx.AsyncClient, owner: Session, api_db
) -> None:  # type: ignore[no-untyped-def]
    rows = await api_db.fetch(
        "SELECT token_hash FROM refresh_tokens WHERE user_id = $1", owner.user_id
    )
    assert rows
    import hashlib

    assert hashlib.sha256(owner.refresh_token.encode()).digest() in {r["token_hash"] for r in rows}
    dump = str(await api_db.fetch("SELECT * FROM refresh_tokens"))
    assert owner.refresh_token not in dump


async def test_switch_org(client: httpx.AsyncClient, owner: Session, api_db) -> None:  # type: ignore[no-untyped-def]
    second = await register_and_login(client, org_name="Second")
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
    refreshed = await client.post(
        f"{API}/auth/refresh", json={"refresh_token": r.json()["refresh_token"]}
    )
    claims = jwt.decode(refreshed.json()["access_token"], options={"verify_signature": False})
    assert claims["org"] == str(second.org_id)
    # Not a member: 404, not 403.
    stranger = await register_and_login(client, org_name="Third")
    r = await client.post(
        f"{API}/auth/switch-org", json={"org_id": str(stranger.org_id)}, headers=owner.headers
    )
    assert r.status_code == 404
