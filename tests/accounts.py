"""An account signed up through a running API, for the tests whose subject is something else
(a client, an outage, PgBouncer): register, confirm the address, sign in.

Confirmation is done in the database, as opening the mailed link would leave it (the link's own
path — signature, single use, expiry — is tested in tests/security/): the API process under
test may have no SMTP server to mail it to.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx


async def sign_up(
    http: httpx.AsyncClient,
    db: asyncpg.Connection[Any] | asyncpg.Pool[Any],
    *,
    email: str,
    password: str,
    name: str = "Test User",
    org_name: str = "Test Org",
    prefix: str = "/api/v1",
) -> tuple[str, str]:
    """(an access token, the id of the account's default project)."""
    registered = await http.post(
        f"{prefix}/auth/register",
        json={"email": email, "password": password, "name": name, "org_name": org_name},
    )
    assert registered.status_code == 202, registered.text
    await db.execute(
        """WITH used AS (UPDATE email_verifications SET used_at = now()
                          WHERE email = $1 AND used_at IS NULL RETURNING user_id)
           UPDATE users SET email_verified_at = now() WHERE id IN (SELECT user_id FROM used)""",
        email,
    )
    signed_in = await http.post(f"{prefix}/auth/login", json={"email": email, "password": password})
    assert signed_in.status_code == 200, signed_in.text
    token = signed_in.json()["access_token"]
    me = await http.get(f"{prefix}/auth/me", headers={"Authorization": f"Bearer {token}"})
    return token, me.json()["projects"][0]["id"]
