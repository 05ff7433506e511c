"""High 1 and High 2 — the API's own mail must not be a relay either.

Anyone can create an organisation, and registration, "resend the link" and invitations all
mail an address the caller chooses. Two limits keep that from becoming a way to flood a
stranger's inbox: at most INVITATIONS_PER_DAY invitations per organisation per day, and at
most MAILS_PER_ADDRESS_PER_HOUR mails (verification links, "someone tried to register") to one
address per hour, whoever asks. The limits are lowered here so the test stays short; what is
checked is that the mail stops at the limit, whatever it is.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest
from tests.api.conftest import API, PASSWORD, Mailbox, Session, unique_email

from codity.api.resources import auth, members


async def test_an_organisation_sends_at_most_its_daily_invitations(
    client: httpx.AsyncClient,
    owner: Session,
    api_db: asyncpg.Connection[Any],
    mailbox: Mailbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break it: remove the `invite:org:` window from members.invite (the fourth invitation is
    then stored and mailed)."""
    monkeypatch.setattr(members, "INVITATIONS_PER_DAY", 3)
    emails = [unique_email("stranger") for _ in range(members.INVITATIONS_PER_DAY + 1)]
    answers = [
        await client.post(
            f"{API}/org/invitations", json={"email": e, "role": "viewer"}, headers=owner.headers
        )
        for e in emails
    ]
    assert [a.status_code for a in answers] == [201] * members.INVITATIONS_PER_DAY + [429]
    refused = answers[-1]
    assert refused.json()["error"]["code"] == "rate_limited"
    assert int(refused.headers["Retry-After"]) > 0
    # Nothing stored and nothing mailed for the refused one.
    stored = await api_db.fetchval(
        "SELECT count(*) FROM invitations WHERE org_id = $1", owner.org_id
    )
    assert stored == members.INVITATIONS_PER_DAY
    assert mailbox.messages(emails[-1]) == []
    assert all(len(mailbox.messages(e)) == 1 for e in emails[:-1])


async def test_one_address_gets_at_most_a_few_mails_an_hour_whoever_asks(
    client: httpx.AsyncClient,
    owner: Session,
    mailbox: Mailbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Registering a taken address again and again, or asking for the link again and again,
    mails that address each time: past the limit the answer stays the same (so the limit
    reveals nothing) and no more mail goes out. Break it: make `_may_mail` answer True."""
    monkeypatch.setattr(auth, "MAILS_PER_ADDRESS_PER_HOUR", 2)
    limit = auth.MAILS_PER_ADDRESS_PER_HOUR

    async def register(email: str) -> httpx.Response:
        return await client.post(
            f"{API}/auth/register",
            json={"email": email, "password": PASSWORD, "name": "x", "org_name": "y"},
        )

    # A taken, verified address: "someone tried to create an account" each time.
    answers = [await register(owner.email) for _ in range(limit + 2)]
    assert {a.status_code for a in answers} == {202}
    assert len({a.text for a in answers}) == 1
    assert len(mailbox.messages(owner.email)) == limit

    # A new, unverified address: the verification mail, then resends, share the same window.
    fresh = unique_email("fresh")
    assert (await register(fresh)).status_code == 202
    for _ in range(limit + 1):
        r = await client.post(f"{API}/auth/verify/resend", json={"email": fresh})
        assert r.status_code == 202
    assert len(mailbox.messages(fresh)) == limit
