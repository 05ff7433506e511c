"""Medium 3 — quotas that could be walked around.

Before: the enqueue limit was per project and projects were unlimited; cron firings, retries and
dead-letter replays were not counted; schedules were unlimited and `* * * * * *` fired every
second. Now: an organisation-wide limit (RATE_LIMIT_ENQUEUE_PER_MINUTE_ORG) beside the project
one; everything that creates or re-runs jobs counts (enqueue, bulk, trigger, retry, replay, cron
firings); caps on projects, queues and schedules per organisation; a minimum cron interval
(CRON_MIN_INTERVAL_S, 60 s outside development).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from tests.api.conftest import API, Session, make_settings
from tests.factories import (
    make_dead_letter,
    make_job,
    make_project,
    make_queue,
    make_schedule,
    make_tenant,
)

from codity import core
from codity.api.resources import dead_letters
from codity.scheduler.runner import SchedulerConfig, build_services
from codity.scheduler.services import CronMaterialiser
from codity.settings import Settings


def _limits(app: FastAPI, database_url: str, **overrides: Any) -> None:
    app.state.settings = make_settings(database_url, **overrides)


async def test_projects_share_the_organisations_enqueue_limit(
    app: FastAPI, client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any],
    database_url: str,
) -> None:  # fmt: skip
    """Break it: reserve only the project's window in check_enqueue_quota."""
    _limits(app, database_url, RATE_LIMIT_ENQUEUE_PER_MINUTE=5, RATE_LIMIT_ENQUEUE_PER_MINUTE_ORG=8)
    second = await make_project(api_db, owner.org_id, "second")
    for project in (owner.project_id, second):
        await make_queue(api_db, project, name="mail")
    url = f"{API}/projects/{{}}/jobs"
    body = {"queue": "mail", "handler": "noop"}
    statuses = [
        (await client.post(url.format(p), json=body, headers=owner.headers)).status_code
        for p in [owner.project_id] * 5 + [second] * 5
    ]
    assert statuses == [201] * 8 + [429] * 2  # 5 + 3: the organisation's 8 are used up
    refused = await client.post(url.format(second), json=body, headers=owner.headers)
    assert refused.json()["error"]["details"]["scope"] == "organisation"
    assert await api_db.fetchval("SELECT count(*) FROM jobs") == 8


async def test_retries_replays_and_triggers_count(
    app: FastAPI, client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any],
    database_url: str,
) -> None:  # fmt: skip
    """Break it: drop check_enqueue_quota from retry_job, replay_one/replay_many or trigger."""
    _limits(app, database_url, RATE_LIMIT_ENQUEUE_PER_MINUTE=3)
    queue = await make_queue(api_db, owner.project_id, name="work")
    base = f"{API}/projects/{owner.project_id}"
    failed = [await make_job(api_db, queue, status="failed", max_attempts=1) for _ in range(2)]
    dead = [await make_dead_letter(api_db, queue, handler="h", payload={}) for _ in range(2)]
    schedule = await make_schedule(
        api_db, queue, name="s", cron="0 * * * *", handler="h",
        next_run_at=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    assert (
        await client.post(f"{base}/jobs/{failed[0]}/retry", headers=owner.headers)
    ).status_code == 200
    assert (
        await client.post(f"{base}/dead-letters/{dead[0]}/replay", headers=owner.headers)
    ).status_code == 200
    assert (
        await client.post(f"{base}/schedules/{schedule}/trigger", headers=owner.headers)
    ).status_code == 201
    # The window is used up: each kind of re-run is refused now, and changes nothing.
    for path, body in (
        (f"/jobs/{failed[1]}/retry", None),
        (f"/dead-letters/{dead[1]}/replay", None),
        ("/dead-letters/replay", {"queue": "work"}),
        (f"/schedules/{schedule}/trigger", None),
    ):
        r = await client.post(base + path, json=body, headers=owner.headers)
        assert r.status_code == 429, (path, r.text)
    assert (
        await api_db.fetchval("SELECT status::text FROM jobs WHERE id = $1", failed[1]) == "failed"
    )
    assert (
        await api_db.fetchval("SELECT replayed_at FROM dead_letter_jobs WHERE id = $1", dead[1])
        is None
    )


async def test_cron_firings_count_against_the_enqueue_limits(db: asyncpg.Connection[Any]) -> None:
    """Break it: call materialise_cron's enqueue without reserve_enqueues."""
    queue = await make_queue(db, name="cron")
    due = datetime.now(UTC) - timedelta(seconds=5)
    for i in range(4):
        await make_schedule(db, queue, name=f"s{i}", cron="0 * * * *", handler="h", next_run_at=due)
    limits = core.EnqueueLimits(per_project=3, per_org=100)
    fired = await core.materialise_cron(db, limits=limits)
    assert len(fired) == 3  # the fourth firing is over the project's limit: skipped
    assert await db.fetchval("SELECT count(*) FROM jobs") == 3
    # Every schedule moved on (the skipped one is not fired again and again).
    assert await db.fetchval("SELECT count(*) FROM scheduled_jobs WHERE next_run_at <= now()") == 0


@pytest.mark.parametrize(
    ("kind", "setting", "path", "body"),
    [
        ("projects", "MAX_PROJECTS_PER_ORG", "/projects", {"name": "p"}),
        ("queues", "MAX_QUEUES_PER_ORG", "/projects/{project}/queues", {"name": "q"}),
        (
            "schedules",
            "MAX_SCHEDULES_PER_ORG",
            "/projects/{project}/schedules",
            {"queue": "base", "name": "s", "cron_expression": "0 * * * *", "handler": "h"},
        ),
    ],
)
async def test_each_organisation_has_caps(
    app: FastAPI, client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any],
    database_url: str, kind: str, setting: str, path: str, body: dict[str, Any],
) -> None:  # fmt: skip
    """Break it: drop orgs.reserve_slot from the create handler of `kind`."""
    await make_queue(api_db, owner.project_id, name="base")  # one queue exists already
    _limits(app, database_url, **{setting: 3})
    url = API + path.format(project=owner.project_id)
    answers = []
    for i in range(4):
        named = {**body, "name": f"{body['name']}-{i}"}
        if kind == "projects":
            named["slug"] = f"p-{i}"
        answers.append(await client.post(url, json=named, headers=owner.headers))
    codes = [a.status_code for a in answers]
    existing = {"projects": 1, "queues": 1, "schedules": 0}[kind]  # the default project, "base"
    assert codes == [201] * (3 - existing) + [409] * (1 + existing)
    assert answers[-1].json()["error"]["code"] == "quota_exceeded"
    assert setting in answers[-1].json()["error"]["message"]


async def test_a_schedule_cannot_fire_more_often_than_the_minimum(
    client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any],
    api_settings: Settings,
) -> None:  # fmt: skip
    """Break it: skip check_min_interval in _checked_cron."""
    assert api_settings.environment == "test"
    assert api_settings.cron_min_interval_s == 60  # the default outside development
    await make_queue(api_db, owner.project_id, name="base")
    base = f"{API}/projects/{owner.project_id}/schedules"
    for expression in ("* * * * * *", "*/30 * * * * *", "0,30 * * * * *"):
        r = await client.post(
            f"{base}/validate", json={"cron_expression": expression}, headers=owner.headers
        )
        assert r.status_code == 422, expression
        assert "CRON_MIN_INTERVAL_S" in r.json()["error"]["message"]
        r = await client.post(
            base,
            json={"queue": "base", "name": "fast", "cron_expression": expression, "handler": "h"},
            headers=owner.headers,
        )
        assert r.status_code == 422
    ok = await client.post(
        base,
        json={"queue": "base", "name": "minutely", "cron_expression": "* * * * *", "handler": "h"},
        headers=owner.headers,
    )
    assert ok.status_code == 201, ok.text
    r = await client.patch(
        f"{base}/{ok.json()['id']}", json={"cron_expression": "*/5 * * * * *"},
        headers=owner.headers,
    )  # fmt: skip
    assert r.status_code == 422
    assert Settings(_env_file=None, CODITY_ENV="development").cron_min_interval_s == 1


async def test_the_scheduler_spaces_out_a_schedule_that_predates_the_minimum(
    db: asyncpg.Connection[Any],
) -> None:
    """A seconds schedule stored before the minimum existed still fires at most once per
    CRON_MIN_INTERVAL_S. Break it: compute next_run without `earliest` in materialise_cron."""
    queue = await make_queue(db, name="old")
    fire = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    schedule = await make_schedule(
        db, queue, name="every-second", cron="* * * * * *", handler="h", next_run_at=fire
    )
    await core.materialise_cron(db, min_interval_s=60)
    next_run = await db.fetchval("SELECT next_run_at FROM scheduled_jobs WHERE id = $1", schedule)
    assert next_run - fire >= timedelta(seconds=60)


async def test_the_scheduler_applies_the_settings_to_cron_firings(
    db: asyncpg.Connection[Any], database_url: str
) -> None:
    """The scheduler process, configured from the settings as `codity scheduler` is, counts
    each firing against the organisation's window (across its projects) and spaces out a
    seconds schedule. Break it: drop `enqueue_limits=` or `cron_min_interval_s=` from
    SchedulerConfig.from_settings (the limits are then None and 0: every firing goes through
    and the schedule is due again a second later)."""
    settings = make_settings(
        database_url,
        RATE_LIMIT_ENQUEUE_PER_MINUTE=100,
        RATE_LIMIT_ENQUEUE_PER_MINUTE_ORG=3,
        CRON_MIN_INTERVAL_S=60,
    )
    tenant = await make_tenant(db)
    other_project = await make_project(db, tenant.org_id)
    fire = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=2)
    for project in (tenant.project_id, other_project):
        queue = await make_queue(db, project, name="ticks")
        for i in range(2):
            await make_schedule(
                db, queue, name=f"s{i}", cron="* * * * * *", handler="h", next_run_at=fire
            )
    config = SchedulerConfig.from_settings(settings, database_url=database_url)
    (cron,) = [s for s in build_services(db, config) if isinstance(s, CronMaterialiser)]
    await cron.run_once()
    per_org = settings.rate_limit_enqueue_per_minute_org
    assert await db.fetchval("SELECT count(*) FROM jobs") == per_org  # 4 due, 3 allowed
    gaps = await db.fetch("SELECT next_run_at - $1::timestamptz AS gap FROM scheduled_jobs", fire)
    assert all(r["gap"] >= timedelta(seconds=settings.cron_min_interval_s) for r in gaps)


async def test_a_queue_replay_re_runs_no_more_than_it_counted(
    app: FastAPI, client: httpx.AsyncClient, owner: Session, api_db: asyncpg.Connection[Any],
    database_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Replaying a whole queue reserves the number of its pending dead letters, then replays:
    a dead letter that arrives in between (a worker gives up on a job at that moment) must not
    be re-run past the reservation. Break it: call replay_queue_dead_letters without `limit`
    in replay_many (the late one is replayed too, unreserved)."""
    _limits(app, database_url, RATE_LIMIT_ENQUEUE_PER_MINUTE=3)
    queue = await make_queue(api_db, owner.project_id, name="work")
    for _ in range(2):
        await make_dead_letter(api_db, queue, handler="h", payload={})
    counted = dead_letters.store.pending_count
    late: list[Any] = []

    async def count_then_one_more_arrives(*args: Any) -> int:
        n = await counted(*args)
        late.append(await make_dead_letter(api_db, queue, handler="h", payload={"late": True}))
        return n

    monkeypatch.setattr(dead_letters.store, "pending_count", count_then_one_more_arrives)
    r = await client.post(
        f"{API}/projects/{owner.project_id}/dead-letters/replay",
        json={"queue": "work"},
        headers=owner.headers,
    )
    assert r.status_code == 200, r.text
    assert r.json()["replayed"] == 2
    assert await api_db.fetchval("SELECT count(*) FROM jobs") == 2
    (late_id,) = late
    assert (
        await api_db.fetchval("SELECT replayed_at FROM dead_letter_jobs WHERE id = $1", late_id)
        is None
    )
    # The window holds exactly what was stored: one more job still fits, two do not.
    used = await api_db.fetchval(
        "SELECT count FROM rate_limit_buckets WHERE key = $1", f"enqueue:project:{owner.project_id}"
    )
    assert used == 2
