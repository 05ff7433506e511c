"""Organisation, members, projects: roles, invitations, the last-owner rule, audit events."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import httpx
import pytest
from tests.api.conftest import (
    API,
    Mailbox,
    MakeOrgUser,
    Session,
    register_and_login,
    unique_email,
)
from tests.waiting import wait_until_blocked

from codity.api.resources.members import lock_and_check_owners
from codity.db.pool import connect
from codity.domain.errors import LastOwnerError
from codity.domain.states import MemberRole


async def test_org_read_and_rename_by_owner_only(
    client: httpx.AsyncClient, owner: Session, make_org_user: MakeOrgUser
) -> None:
    r = await client.get(f"{API}/org", headers=owner.headers)
    assert r.status_code == 200
    assert r.json()["id"] == str(owner.org_id)
    admin = await make_org_user("admin")
    assert (
        await client.patch(f"{API}/org", json={"name": "X"}, headers=admin.headers)
    ).status_code == 403
    r = await client.patch(f"{API}/org", json={"name": "Renamed"}, headers=owner.headers)
    assert r.json()["name"] == "Renamed"


async def test_invite_list_accept_and_revoke(
    client: httpx.AsyncClient,
    owner: Session,
    api_db: asyncpg.Connection[Any],
    mailbox: Mailbox,
) -> None:
    other = await register_and_login(client, api_db, org_name="Elsewhere")
    r = await client.post(
        f"{API}/org/invitations",
        json={"email": other.email, "role": "admin"},
        headers=owner.headers,
    )
    assert r.status_code == 201, r.text
    invitation = r.json()
    assert (invitation["email"], invitation["role"]) == (other.email, "admin")
    assert invitation["invited_by_email"] == owner.email
    # Nobody is a member because of an email alone: only the invitee's acceptance does it.
    members = (await client.get(f"{API}/org/members", headers=owner.headers)).json()["items"]
    assert {m["email"] for m in members} == {owner.email}
    listed = (await client.get(f"{API}/org/invitations", headers=owner.headers)).json()["items"]
    assert [i["id"] for i in listed] == [invitation["id"]]

    token = mailbox.last_token(other.email)
    accepted = await client.post(
        f"{API}/auth/invitations/accept", json={"token": token}, headers=other.headers
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["org"]["id"] == str(owner.org_id)
    assert accepted.json()["role"] == "admin"
    members = (await client.get(f"{API}/org/members", headers=owner.headers)).json()["items"]
    assert {(m["email"], m["role"]) for m in members} == {
        (owner.email, "owner"), (other.email, "admin")
    }  # fmt: skip
    assert (await client.get(f"{API}/org/invitations", headers=owner.headers)).json()["items"] == []

    # Revoked: the link stops working.
    newcomer = unique_email("invitee")
    r = await client.post(
        f"{API}/org/invitations", json={"email": newcomer, "role": "viewer"}, headers=owner.headers
    )
    revoked = await client.delete(f"{API}/org/invitations/{r.json()['id']}", headers=owner.headers)
    assert revoked.status_code == 204
    assert (await client.get(f"{API}/org/invitations", headers=owner.headers)).json()["items"] == []
    actions = await api_db.fetch(
        "SELECT action FROM audit_events WHERE org_id = $1 ORDER BY id", owner.org_id
    )
    assert [a["action"] for a in actions][-4:] == [
        "member.invite", "member.join", "member.invite", "member.invitation_revoke"
    ]  # fmt: skip


async def test_the_last_owner_cannot_be_demoted_or_removed(
    client: httpx.AsyncClient, owner: Session, make_org_user: MakeOrgUser
) -> None:
    url = f"{API}/org/members/{owner.user_id}"
    r = await client.patch(url, json={"role": "admin"}, headers=owner.headers)
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "last_owner"
    assert (await client.delete(url, headers=owner.headers)).status_code == 409
    # With a second owner, the first can step down.
    second = await make_org_user("member")
    r = await client.patch(
        f"{API}/org/members/{second.user_id}", json={"role": "owner"}, headers=owner.headers
    )
    assert r.status_code == 200
    assert (
        await client.patch(url, json={"role": "admin"}, headers=owner.headers)
    ).status_code == 200
    # The demotion applies on the next request, not when the token expires.
    r = await client.patch(
        f"{API}/org/members/{second.user_id}", json={"role": "viewer"}, headers=owner.headers
    )
    assert r.status_code == 403


async def test_member_of_another_org_is_not_found(
    client: httpx.AsyncClient, owner: Session, outsider: Session
) -> None:
    r = await client.patch(
        f"{API}/org/members/{outsider.user_id}", json={"role": "viewer"}, headers=owner.headers
    )
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "member_not_found"


async def test_projects_crud_and_pagination(
    client: httpx.AsyncClient, owner: Session, make_org_user: MakeOrgUser
) -> None:
    for name in ("Alpha", "Beta", "Gamma"):
        r = await client.post(f"{API}/projects", json={"name": name}, headers=owner.headers)
        assert r.status_code == 201, r.text
    dup = await client.post(f"{API}/projects", json={"name": "alpha"}, headers=owner.headers)
    assert dup.status_code == 409
    assert dup.json()["error"]["code"] == "slug_taken"

    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get(f"{API}/projects", params=params, headers=owner.headers)).json()
        seen += [p["slug"] for p in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["alpha", "beta", "default", "gamma"]
    bad = await client.get(f"{API}/projects", params={"cursor": "%%%"}, headers=owner.headers)
    assert bad.status_code == 422

    member = await make_org_user("member")
    assert (
        await client.post(f"{API}/projects", json={"name": "M"}, headers=member.headers)
    ).status_code == 403
    url = f"{API}/projects/{owner.project_id}"
    assert (await client.patch(url, json={"name": "Main"}, headers=owner.headers)).json()[
        "name"
    ] == "Main"
    assert (await client.delete(url, headers=owner.headers)).status_code == 204
    assert (await client.get(url, headers=owner.headers)).status_code == 404


async def test_two_owners_demoting_each_other_at_once_leave_one_owner(
    owner: Session, make_org_user: MakeOrgUser, database_url: str
) -> None:
    """Two transactions, interleaved by hand: the second must wait for the first's owner rows
    and then see only one owner left. Without the lock both would pass the check (2 owners
    each) and commit, leaving the organisation with none."""
    second = await make_org_user("owner")
    demote = "UPDATE memberships SET role = 'admin' WHERE org_id = $1 AND user_id = $2"
    c1, c2 = await connect(database_url), await connect(database_url)
    observer = await connect(database_url)
    try:
        tx1 = c1.transaction()
        await tx1.start()
        await lock_and_check_owners(c1, owner.org_id, second.user_id, MemberRole.ADMIN)
        await c1.execute(demote, owner.org_id, second.user_id)

        async def the_other_owner() -> None:
            async with c2.transaction():
                await lock_and_check_owners(c2, owner.org_id, owner.user_id, MemberRole.ADMIN)
                await c2.execute(demote, owner.org_id, owner.user_id)

        racing = asyncio.create_task(the_other_owner())
        # PostgreSQL says the second transaction waits on the first one's owner rows.
        await wait_until_blocked(observer, c2.get_server_pid(), c1.get_server_pid())
        await tx1.commit()
        with pytest.raises(LastOwnerError):
            await racing
        owners = await c1.fetchval(
            "SELECT count(*) FROM memberships WHERE org_id = $1 AND role = 'owner'", owner.org_id
        )
        assert owners == 1
    finally:
        for conn in (c1, c2, observer):
            await conn.close()
