"""Medium 5 — API keys outlived their creator's authority.

Now: a key's effective role is the lower of its own role and its creator's current role in the
organisation; it stops working when the creator leaves (and is revoked then); every key
expires (API_KEY_TTL_DAYS, 90 by default); the list shows who created each key and its last
use.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import asyncpg
import httpx
import pytest
from tests.api.conftest import API, MakeApiKey, MakeOrgUser, Session
from tests.factories import make_api_key, make_membership, make_queue, make_tenant

from codity.db import migrate
from codity.db.dsn import plain_dsn
from codity.settings import Settings


async def _pause(client: httpx.AsyncClient, key: str, project: Any, queue: Any) -> int:
    r = await client.post(
        f"{API}/projects/{project}/queues/{queue}/pause",
        headers={"Authorization": f"Bearer {key}"},
    )
    return r.status_code


async def test_a_key_never_does_more_than_its_creator_may_now(
    client: httpx.AsyncClient,
    owner: Session,
    make_org_user: MakeOrgUser,
    make_api_key: MakeApiKey,
    api_db: asyncpg.Connection[Any],
) -> None:
    """Break it: use the key's own role in api_api_keys_use (k.role instead of greatest(...))."""
    admin = await make_org_user("admin")
    key, _ = await make_api_key(admin, role="admin")
    queue = await make_queue(api_db, owner.project_id, name="mail")
    assert await _pause(client, key, owner.project_id, queue) == 200
    # The creator is demoted to viewer: the admin key now acts as a viewer.
    r = await client.patch(
        f"{API}/org/members/{admin.user_id}", json={"role": "viewer"}, headers=owner.headers
    )
    assert r.status_code == 200
    assert await _pause(client, key, owner.project_id, queue) == 403
    read = await client.get(
        f"{API}/projects/{owner.project_id}/queues", headers={"Authorization": f"Bearer {key}"}
    )
    assert read.status_code == 200


async def test_a_key_stops_working_when_its_creator_leaves_and_is_revoked(
    client: httpx.AsyncClient,
    owner: Session,
    make_org_user: MakeOrgUser,
    make_api_key: MakeApiKey,
    api_db: asyncpg.Connection[Any],
) -> None:
    """Break it: drop the membership join from api_api_keys_use (the first key keeps working
    once its creator's membership is gone) or revoke_keys_of from remove_member (the second
    key stays unrevoked)."""
    url = f"{API}/projects/{owner.project_id}/queues"
    # The membership goes away some other way than the API (a deleted user, an SQL fix): the
    # key stops at once, before any revocation.
    gone = await make_org_user("admin")
    orphan, _ = await make_api_key(gone, role="member")
    assert (await client.get(url, headers={"Authorization": f"Bearer {orphan}"})).status_code == 200
    await api_db.execute(
        "DELETE FROM memberships WHERE org_id = $1 AND user_id = $2", owner.org_id, gone.user_id
    )
    assert (await client.get(url, headers={"Authorization": f"Bearer {orphan}"})).status_code == 401
    # Removed through the API: the key is revoked too.
    admin = await make_org_user("admin")
    key, key_id = await make_api_key(admin, role="member")
    headers = {"Authorization": f"Bearer {key}"}
    assert (await client.get(url, headers=headers)).status_code == 200
    r = await client.delete(f"{API}/org/members/{admin.user_id}", headers=owner.headers)
    assert r.status_code == 204
    assert (await client.get(url, headers=headers)).status_code == 401
    revoked = await api_db.fetchval("SELECT revoked_at FROM api_keys WHERE id = $1", key_id)
    assert revoked is not None
    # Even invited back, the old key stays dead.
    await make_membership(api_db, owner.org_id, admin.user_id, "admin")
    assert (await client.get(url, headers=headers)).status_code == 401


async def test_every_key_expires_by_default_and_the_list_shows_its_creator(
    client: httpx.AsyncClient, owner: Session, api_settings: Settings
) -> None:
    """Break it: create keys with expires_at NULL when no lifetime is asked for."""
    r = await client.post(
        f"{API}/projects/{owner.project_id}/api-keys",
        json={"name": "ci"},
        headers=owner.headers,
    )
    assert r.status_code == 201, r.text
    created = r.json()
    expires = dt.datetime.fromisoformat(created["expires_at"])
    lifetime = expires - dt.datetime.fromisoformat(created["created_at"])
    assert abs(lifetime - dt.timedelta(days=api_settings.api_key_ttl_days)) < dt.timedelta(
        seconds=5
    )
    assert api_settings.api_key_ttl_days == 90
    await client.get(  # one use
        f"{API}/projects/{owner.project_id}/queues",
        headers={"Authorization": f"Bearer {created['key']}"},
    )
    listed = (
        await client.get(f"{API}/projects/{owner.project_id}/api-keys", headers=owner.headers)
    ).json()["items"]
    (key,) = listed
    assert key["created_by"] == {
        "id": str(owner.user_id),
        "email": owner.email,
        "name": "Test User",
    }
    assert key["last_used_at"] is not None
    assert "key" not in key


async def test_no_key_is_left_without_an_expiry(empty_database_url: str) -> None:
    """Keys from before the default expiry (expires_at NULL, which authentication took for
    "never") get one on upgrade, and the column refuses NULL from then on. Break it: drop
    migration 0019 (the old keys keep NULL and a NULL can still be written)."""
    migrate.upgrade(empty_database_url, "0017")
    conn = await asyncpg.connect(plain_dsn(empty_database_url))
    try:
        tenant = await make_tenant(conn)
        ancient = await make_api_key(conn, tenant.project_id)
        recent = await make_api_key(conn, tenant.project_id)
        await conn.execute(
            "UPDATE api_keys SET expires_at = NULL,"
            " created_at = now() - CASE id WHEN $1 THEN interval '400 days'"
            " ELSE interval '1 day' END",
            ancient,
        )
        migrate.upgrade(empty_database_url)
        rows = await conn.fetch(
            "SELECT id, expires_at - created_at AS lifetime, expires_at - now() AS left_"
            " FROM api_keys"
        )
        by_id = {r["id"]: r for r in rows}
        # A recent key gets the default lifetime; an old one a short grace, not an instant cut.
        assert by_id[recent]["lifetime"] == dt.timedelta(days=90)
        assert dt.timedelta(days=6) < by_id[ancient]["left_"] <= dt.timedelta(days=7)
        with pytest.raises(asyncpg.NotNullViolationError):
            await conn.execute("UPDATE api_keys SET expires_at = NULL WHERE id = $1", recent)
    finally:
        await conn.close()
