"""docs/SECURITY_GUIDELINES.md cannot drift from ALL_ROUTES; the access log carries no secrets."""

from __future__ import annotations

from pathlib import Path

import httpx
from structlog.testing import capture_logs
from tests.api.conftest import API, PASSWORD, Session, login, refresh_headers

from codity.api.permissions import BEGIN, END, render_matrix
from codity.api.routes import ALL_ROUTES

DOC = Path(__file__).resolve().parents[2] / "docs" / "SECURITY_GUIDELINES.md"


def test_permission_matrix_in_the_doc_is_the_route_table() -> None:
    text = DOC.read_text()
    section = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert section == render_matrix(ALL_ROUTES), (
        "docs/SECURITY_GUIDELINES.md is stale: run "
        "`python -m codity.api.permissions docs/SECURITY_GUIDELINES.md`"
    )


async def test_access_log_carries_no_secrets(client: httpx.AsyncClient, owner: Session) -> None:
    with capture_logs() as logs:
        await login(client, owner.email, PASSWORD)
        await client.get(f"{API}/auth/me", headers=owner.headers)
        await client.post(f"{API}/auth/refresh", headers=refresh_headers(owner))
    access = [e for e in logs if e["event"] == "request"]
    assert len(access) == 3
    assert all(e["request_id"] for e in access)
    dumped = repr(logs)
    for secret in (PASSWORD, owner.access_token, owner.refresh_token, owner.csrf_token):
        assert secret not in dumped
