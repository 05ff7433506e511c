"""High 1 — membership by unverified email.

Before: registering auto-accepted every pending invitation for the address (at any role),
invitations never expired and could not be listed or revoked, and `POST /org/members` attached
whatever account held an address. An attacker who registered jane@victim.com first joined the
victim's organisation when Jane was invited.

Now: the email is verified by a signed, single-use, expiring link; an unverified account can
neither sign in nor accept; invitations are single-use tokens that expire and are accepted
explicitly by the signed-in, verified invitee; they can be listed and revoked.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
import jwt
from tests.api.conftest import API, PASSWORD, Mailbox, Session, login, unique_email
from tests.factories import make_invitation, make_membership, make_tenant, make_user

from codity.api.tokens import issue_access_token, issue_verification_token, sha256
from codity.domain.states import MemberRole
from codity.settings import Settings


async def _invite(client: httpx.AsyncClient, owner: Session, email: str, role: str) -> None:
    r = await client.post(
        f"{API}/org/invitations", json={"email": email, "role": role}, headers=owner.headers
    )
    assert r.status_code == 201, r.text


async def _members(api_db: asyncpg.Connection[Any], org_id: uuid.UUID) -> set[str]:
    rows = await api_db.fetch(
        "SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = $1",
        org_id,
    )
    return {r["email"] for r in rows}


async def test_registering_an_invited_address_joins_nothing(
    client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any], mailbox: Mailbox
) -> None:
    """The attack itself. Break it: put back the "accept every pending invitation of this
    email" step in registration (api_invitations_accept_all) and this fails."""
    jane = unique_email("jane")
    await _invite(client, owner, jane, "admin")
    r = await client.post(
        f"{API}/auth/register",
        json={"email": jane, "password": PASSWORD, "name": "Mallory", "org_name": "Trap"},
    )
    assert r.status_code == 202
    assert jane not in await _members(api_db, owner.org_id)
    # And the account cannot even sign in until the address is proven.
    assert (await login(client, jane)).json()["error"]["code"] == "email_not_verified"


async def test_an_unverified_account_cannot_accept_even_with_the_token(
    client: httpx.AsyncClient,
    owner: Session,
    api_db: asyncpg.Connection[Any],
    api_settings: Settings,
) -> None:
    """Break it: drop `u.email_verified_at IS NOT NULL` from api_invitations_accept."""
    email = unique_email("unverified")
    user_id = await make_user(api_db, email, verified=False)
    own = await make_tenant(api_db)
    await make_membership(api_db, own.org_id, user_id, "owner")
    token = "invitation-token-" + uuid.uuid4().hex
    await make_invitation(api_db, owner.org_id, email=email, token_hash=sha256(token))
    # A valid access token for the account (as if it had signed in before verification existed).
    access = issue_access_token(
        api_settings, user_id=user_id, org_id=own.org_id, role=MemberRole.OWNER
    )
    r = await client.post(
        f"{API}/auth/invitations/accept",
        json={"token": token},
        headers={"Authorization": f"Bearer {access}"},
    )
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_invitation"
    assert email not in await _members(api_db, owner.org_id)


async def test_an_invitation_is_for_its_email_single_use_expiring_and_revocable(
    client: httpx.AsyncClient,
    owner: Session,
    outsider: Session,
    api_db: asyncpg.Connection[Any],
) -> None:
    token = "t-" + uuid.uuid4().hex

    async def accept(session: Session) -> httpx.Response:
        return await client.post(
            f"{API}/auth/invitations/accept", json={"token": token}, headers=session.headers
        )

    # Sent to someone else: the outsider (verified, signed in) cannot use it.
    await make_invitation(api_db, owner.org_id, email=unique_email(), token_hash=sha256(token))
    assert (await accept(outsider)).json()["error"]["code"] == "invalid_invitation"
    await api_db.execute("DELETE FROM invitations")
    # Sent to the outsider: works once...
    await make_invitation(api_db, owner.org_id, email=outsider.email, token_hash=sha256(token))
    assert (await accept(outsider)).status_code == 200
    assert outsider.email in await _members(api_db, owner.org_id)
    await api_db.execute(
        "DELETE FROM memberships WHERE org_id = $1 AND user_id = $2", owner.org_id, outsider.user_id
    )
    assert (await accept(outsider)).json()["error"]["code"] == "invalid_invitation"  # ...once
    # Expired.
    await api_db.execute("DELETE FROM invitations")
    await make_invitation(
        api_db, owner.org_id, email=outsider.email, token_hash=sha256(token), expires_in_days=-1
    )
    assert (await accept(outsider)).json()["error"]["code"] == "invalid_invitation"
    # Revoked through the API.
    await api_db.execute("DELETE FROM invitations")
    invitation = await make_invitation(
        api_db, owner.org_id, email=outsider.email, token_hash=sha256(token)
    )
    r = await client.delete(f"{API}/org/invitations/{invitation}", headers=owner.headers)
    assert r.status_code == 204
    assert (await accept(outsider)).json()["error"]["code"] == "invalid_invitation"
    assert outsider.email not in await _members(api_db, owner.org_id)


async def test_inviting_an_existing_account_does_not_make_it_a_member(
    client: httpx.AsyncClient, owner: Session, outsider: Session, api_db: asyncpg.Connection[Any]
) -> None:
    """`POST /org/members` used to attach whatever account held the address. Break it: make
    the invitation route insert the membership when the email has an account."""
    await _invite(client, owner, outsider.email, "owner")
    assert outsider.email not in await _members(api_db, owner.org_id)
    r = await client.post(
        f"{API}/org/members", json={"email": outsider.email}, headers=owner.headers
    )
    assert r.status_code == 405  # the route is gone: invitations are the only way in


async def test_the_verification_link_is_signed_single_use_and_expiring(
    client: httpx.AsyncClient, api_db: asyncpg.Connection[Any], api_settings: Settings,
    mailbox: Mailbox,
) -> None:  # fmt: skip
    email = unique_email("v")
    await client.post(
        f"{API}/auth/register",
        json={"email": email, "password": PASSWORD, "name": "x", "org_name": "y"},
    )
    token = mailbox.last_token(email)
    claims = jwt.decode(token, options={"verify_signature": False})
    # Forged: the same claims signed with another key.
    forged = jwt.encode(claims, "someone-else-secret-that-is-long-enough", algorithm="HS256")
    r = await client.post(f"{API}/auth/verify", json={"token": forged})
    assert r.json()["error"]["code"] == "invalid_verification_token"
    # Expired: a correctly signed token whose row has expired is refused too.
    await api_db.execute("UPDATE email_verifications SET expires_at = now() - interval '1 s'")
    r = await client.post(f"{API}/auth/verify", json={"token": token})
    assert r.json()["error"]["code"] == "invalid_verification_token"
    await api_db.execute("UPDATE email_verifications SET expires_at = now() + interval '1 h'")
    # For another address: a link issued for a row but naming another email does nothing.
    other = issue_verification_token(
        api_settings,
        verification_id=uuid.UUID(claims["jti"]),
        user_id=uuid.UUID(claims["sub"]),
        email="someone-else@example.com",
    )
    assert (await client.post(f"{API}/auth/verify", json={"token": other})).status_code == 422
    # Once.
    assert (await client.post(f"{API}/auth/verify", json={"token": token})).status_code == 200
    assert (await client.post(f"{API}/auth/verify", json={"token": token})).status_code == 422


async def test_register_answers_the_same_for_a_taken_address(
    client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any], mailbox: Mailbox
) -> None:
    """Low: registration cannot be used to find out who has an account; only the mail differs.
    Break it: answer 409 email_taken again."""
    count = "SELECT (SELECT count(*) FROM organizations), (SELECT count(*) FROM users)"
    before = tuple(await api_db.fetchrow(count))
    taken = await client.post(
        f"{API}/auth/register",
        json={"email": owner.email.upper(), "password": PASSWORD, "name": "x", "org_name": "y"},
    )
    fresh_email = unique_email("fresh")
    fresh = await client.post(
        f"{API}/auth/register",
        json={"email": fresh_email, "password": PASSWORD, "name": "x", "org_name": "y"},
    )
    assert (taken.status_code, taken.json()) == (fresh.status_code, fresh.json())
    assert tuple(await api_db.fetchrow(count)) == (before[0] + 1, before[1] + 1)  # only fresh
    # The mails differ: a verification link for the new address, a notice for the taken one.
    assert "Confirm your email" in str(mailbox.messages(fresh_email)[-1]["Subject"])
    assert "tried to create" in str(mailbox.messages(owner.email)[-1]["Subject"])
