"""Low — payload values under secret-looking keys are masked for viewers.

A viewer reads everything in the organisation; a job's payload often carries the job's own
credentials. Values under keys like authorization, token, password, secret, api_key (at any
depth) are replaced by a mask in the job detail (payload, result, log fields), the job's log
pages, dead letters and schedules, for viewers (people and API keys); members and above see them.
The dashboard shows what the API answers (browser suite:
`test_a_viewer_sees_masked_secrets_in_a_job`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
from tests.api.conftest import API, MakeApiKey, MakeOrgUser, Session
from tests.factories import make_dead_letter, make_job, make_job_log, make_queue, make_schedule

from codity.domain.masking import MASK, mask_secrets

PAYLOAD = {
    "url": "https://hooks.example/x",
    "headers": {"Authorization": "Bearer live-secret-1", "Accept": "json"},
    "api_key": "live-secret-2",
    "nested": [{"db_password": "live-secret-3", "user": "app"}],
    "clientSecret": "live-secret-4",
}


def test_masking_keeps_the_structure_and_hides_only_secret_values() -> None:
    masked = mask_secrets(PAYLOAD)
    assert masked == {
        "url": "https://hooks.example/x",
        "headers": {"Authorization": MASK, "Accept": "json"},
        "api_key": MASK,
        "nested": [{"db_password": MASK, "user": "app"}],
        "clientSecret": MASK,
    }


async def test_viewers_get_masked_values_members_get_them_all(
    client: httpx.AsyncClient,
    owner: Session,
    make_org_user: MakeOrgUser,
    make_api_key: MakeApiKey,
    api_db: asyncpg.Connection[Any],
) -> None:
    """Break it: make `hides_secrets` answer False (or drop `masked` from a read)."""
    queue = await make_queue(api_db, owner.project_id, name="hooks")
    job = await make_job(api_db, queue, payload=PAYLOAD, status="completed")
    await api_db.execute(
        "UPDATE jobs SET result = $2 WHERE id = $1", job, {"token": "live-secret-5", "ok": True}
    )
    await make_job_log(api_db, job, message="called", fields={"password": "live-secret-6"})
    await make_dead_letter(api_db, queue, handler="h", payload=PAYLOAD)
    await make_schedule(
        api_db, queue, name="s", cron="0 * * * *", handler="h", payload=PAYLOAD,
        next_run_at=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    base = f"{API}/projects/{owner.project_id}"
    paths = [f"/jobs/{job}", f"/jobs/{job}/logs", "/dead-letters", "/schedules"]
    viewer = await make_org_user("viewer")
    viewer_key, _ = await make_api_key(owner, role="viewer")
    member = await make_org_user("member")

    async def bodies(headers: dict[str, str]) -> str:
        texts = []
        for path in paths:
            r = await client.get(base + path, headers=headers)
            assert r.status_code == 200, r.text
            texts.append(r.text)
        return "\n".join(texts)

    for headers in (viewer.headers, {"Authorization": f"Bearer {viewer_key}"}):
        seen = await bodies(headers)
        assert "live-secret" not in seen
        assert MASK in seen
        assert "https://hooks.example/x" in seen  # everything else stays readable
    seen = await bodies(member.headers)
    for n in range(1, 7):
        assert f"live-secret-{n}" in seen


async def test_a_viewer_cannot_test_guesses_of_a_masked_value_by_searching(
    client: httpx.AsyncClient,
    owner: Session,
    make_org_user: MakeOrgUser,
    make_api_key: MakeApiKey,
    api_db: asyncpg.Connection[Any],
) -> None:
    """The jobs list's payload search is an exact match: `api_key = "<guess>"` listing the job
    or not would tell a viewer whether the guess is the masked value. Break it: drop the
    `names_a_secret` check from list_jobs (the viewer's guess then finds the job)."""
    queue = await make_queue(api_db, owner.project_id, name="hooks")
    job = await make_job(api_db, queue, payload=PAYLOAD)
    url = f"{API}/projects/{owner.project_id}/jobs"
    guesses = [
        'api_key = "live-secret-2"',
        'headers.Authorization = "Bearer live-secret-1"',
        'headers = {"Authorization": "Bearer live-secret-1"}',  # the key inside the value
    ]
    viewer = await make_org_user("viewer")
    viewer_key, _ = await make_api_key(owner, role="viewer")
    for headers in (viewer.headers, {"Authorization": f"Bearer {viewer_key}"}):
        for guess in guesses:
            r = await client.get(url, params={"payload": guess}, headers=headers)
            assert r.status_code == 403, (guess, r.text)
            assert r.json()["error"]["code"] == "forbidden"
        # Searching by a key that is shown is fine.
        r = await client.get(url, params={"payload": "headers.Accept = json"}, headers=headers)
        assert [j["id"] for j in r.json()["items"]] == [job]
    member = await make_org_user("member")
    for guess in guesses:
        r = await client.get(url, params={"payload": guess}, headers=member.headers)
        assert [j["id"] for j in r.json()["items"]] == [job], guess
