"""Charts: windows of points from the rollup tables, scoped to the project."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from tests.api.project_api import assert_error, project_api
from tests.factories import make_finished_attempt, make_queue, make_rollup_state, make_worker

from codity import core
from codity.core.stats import floor_minute


async def test_points_come_from_the_rollups_not_from_jobs(database_url: str) -> None:
    async with project_api(database_url) as api:
        queue = await api.queue("reports")
        queue_id = uuid.UUID(queue["id"])
        worker = await make_worker(api.pool, "host-a")
        now = datetime.now(UTC)
        minute = floor_minute(now) - timedelta(minutes=3)
        await make_rollup_state(api.pool, minute)
        for i in range(4):
            at = minute + timedelta(seconds=i)
            await make_finished_attempt(
                api.pool, queue_id, handler="report.generate", run_at=at - timedelta(milliseconds=50),
                started_at=at, finished_at=at + timedelta(milliseconds=200), worker_id=worker,
            )  # fmt: skip
        # Another tenant's history in the same minute must not show up.
        other = await make_queue(api.pool)
        await make_finished_attempt(api.pool, other, run_at=minute, started_at=minute,
                                    finished_at=minute + timedelta(seconds=1))  # fmt: skip
        while (await core.rollup_stats(api.pool, datetime.now(UTC))).minute is not None:
            pass  # every closed minute up to now (and any quarter or hour they close)
        # The history is gone: whatever the chart shows now can only come from the rollups.
        await api.pool.execute("DELETE FROM jobs")

        r = await api.get("/charts", params={"window": "1h"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["bucket_minutes"] == 1
        assert len(body["queue"]) == 60
        point = next(p for p in body["queue"] if p["at"].startswith(minute.isoformat()[:16]))
        assert (point["completed"], point["failed"]) == (4, 0)
        assert 50 / 1.5 <= point["wait_p50_ms"] <= 50 * 1.5
        assert [h["handler"] for h in body["handlers"]] == ["report.generate"]
        run = next(p for p in body["handlers"][0]["points"] if p["completed"])
        assert 200 / 1.5 <= run["run_p95_ms"] <= 200 * 1.5
        assert [w["hostname"] for w in body["workers"]] == ["host-a"]
        assert sum(p["completed"] for p in body["workers"][0]["points"]) == 4

        day = (await api.get("/charts", params={"window": "24h", "queue": "reports"})).json()
        assert (day["bucket_minutes"], len(day["queue"])) == (15, 96)
        assert sum(p["completed"] for p in day["queue"]) == 4
        week = (await api.get("/charts", params={"window": "7d"})).json()
        assert (week["bucket_minutes"], len(week["queue"])) == (60, 168)
        assert sum(p["completed"] for p in week["queue"]) == 4

        assert_error(await api.get("/charts", params={"window": "2h"}), 422, "validation_error")
        assert_error(await api.get("/charts", params={"queue": "nope"}), 404, "queue_not_found")


async def test_a_bucket_whose_coarse_row_is_not_written_yet_counts_its_minutes(
    database_url: str,
) -> None:
    """Just after a quarter closes, its quarter row waits for its last minute to settle; the
    24 h chart must show that quarter from its minute rows meanwhile (it once read nothing,
    and the API test above flaked when it ran within seconds after a quarter hour)."""
    from codity.api.schemas.charts import ChartWindow
    from codity.api.stores.charts import read_charts

    async with project_api(database_url) as api:
        queue_id = uuid.UUID((await api.queue("edge"))["id"])
        quarter = datetime(2026, 3, 1, 9, 45, tzinfo=UTC)
        await make_rollup_state(api.pool, quarter)
        for m in range(14):  # 09:45 .. 09:58 rolled up; 09:59 not settled yet at 10:00:02
            at = quarter + timedelta(minutes=m, seconds=1)
            await make_finished_attempt(
                api.pool, queue_id, run_at=at, started_at=at, finished_at=at
            )
        now = quarter + timedelta(minutes=15, seconds=2)
        while (await core.rollup_stats(api.pool, now)).minute is not None:
            pass
        assert not await api.pool.fetchval("SELECT count(*) FROM queue_stats WHERE grain = 15")
        charts = await read_charts(api.pool, api.project_id, ChartWindow.DAY, now, None)
        assert sum(p.completed for p in charts.queue) == 14
        # Once the quarter row exists, its minutes are not counted a second time.
        at = quarter + timedelta(minutes=14, seconds=1)
        await make_finished_attempt(api.pool, queue_id, run_at=at, started_at=at, finished_at=at)
        later = now + timedelta(seconds=10)
        while (await core.rollup_stats(api.pool, later)).minute is not None:
            pass
        assert await api.pool.fetchval("SELECT count(*) FROM queue_stats WHERE grain = 15") == 1
        charts = await read_charts(api.pool, api.project_id, ChartWindow.DAY, later, None)
        assert sum(p.completed for p in charts.queue) == 15
