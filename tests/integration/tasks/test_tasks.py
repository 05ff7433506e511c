"""codity.App tasks: typed arguments validated at enqueue, run by a real worker (through the
pytest plugin's fixtures), options per call, sync enqueue, eager mode."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.integration.tasks import tasks_app
from tests.integration.tasks.tasks_app import Address, app, build_report, count_words, send_welcome
from tests.waiting import wait_for

import codity
from codity.settings import get_settings
from codity.testing import TestDatabase, TestWorker, eager

WHEN = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture
async def shop(codity_database: TestDatabase) -> TestDatabase:
    await codity_database.setup(app)
    tasks_app.seen.clear()
    yield codity_database
    await app.aclose()


async def _job(db: TestDatabase, job_id: int) -> dict[str, object]:
    conn = await db.connect()
    try:
        row = await conn.fetchrow(
            "SELECT j.handler, j.payload::text AS payload, j.status::text AS status, j.priority,"
            " j.max_attempts, j.timeout_ms, j.result::text AS result, j.progress, q.name AS queue"
            " FROM jobs j JOIN queues q ON q.id = j.queue_id WHERE j.id = $1",
            job_id,
        )
        return dict(row)
    finally:
        await conn.close()


async def test_tasks_run_on_a_worker_with_typed_arguments_and_their_context(
    shop: TestDatabase, codity_worker: TestWorker
) -> None:
    ref = uuid.uuid4()
    welcome = await send_welcome.enqueue(42, when=WHEN, address=Address(street="1 Main", city="X"))
    words = await count_words.enqueue(text="one two three", ref=ref)
    report = await build_report.enqueue()
    stored = await _job(shop, welcome.id)
    # The handler name is the function's dotted path; the task's defaults are on the row.
    assert stored["handler"] == "tests.integration.tasks.tasks_app.send_welcome"
    assert (stored["queue"], stored["priority"], stored["max_attempts"], stored["timeout_ms"]) == (
        "emails", 5, 4, 30_000,
    )  # fmt: skip
    assert (await _job(shop, report.id))["handler"] == "reports.build"

    drained = await codity_worker.run_until_empty(app)
    assert drained["completed"] == 3
    by_task = dict(tasks_app.seen)
    # The worker gave back real Python values, not the JSON the payload holds.
    assert by_task["send_welcome"] == (42, WHEN, Address(street="1 Main", city="X"))
    assert by_task["count_words"] == (1, False, ref)  # attempt 1; no timeout -> no deadline
    assert by_task["build_report"] == (7, 1)
    assert (await _job(shop, words.id))["result"] == "3"
    assert (await _job(shop, words.id))["progress"] == 100
    assert (await _job(shop, welcome.id))["result"] == '{"user": "42", "when_type": "datetime"}'


BAD_CALLS = [
    (send_welcome, (), {"user_id": "forty-two", "when": WHEN}, "user_id: Input should be a valid integer"),
    (send_welcome, (), {"when": WHEN}, "missing a required argument: 'user_id'"),
    (send_welcome, (1, WHEN), {"surprise": True}, "unexpected keyword argument 'surprise'"),
    (send_welcome, (1,), {"when": "not a date"}, "when: Input should be a valid datetime"),
    (count_words, (), {"text": 3, "ref": uuid.uuid4()}, "text: Input should be a valid string"),
]  # fmt: skip


@pytest.mark.parametrize(("task", "args", "kwargs", "message"), BAD_CALLS)
async def test_a_bad_argument_fails_at_enqueue_and_writes_nothing(
    shop: TestDatabase, task: codity.Task, args: tuple, kwargs: dict, message: str
) -> None:
    with pytest.raises(codity.ValidationError, match=message):
        await task.enqueue(*args, **kwargs)
    with pytest.raises(codity.ValidationError, match=message):
        task.enqueue_sync(*args, **kwargs)
    assert await shop.job_counts() == {}


async def test_options_per_call_and_enqueue_many(shop: TestDatabase) -> None:
    first = await send_welcome.options(idempotency_key="welcome-1").enqueue(1, when=WHEN)
    again = await send_welcome.options(idempotency_key="welcome-1").enqueue(1, when=WHEN)
    assert again.id == first.id
    assert not again.created
    later = await send_welcome.options(delay_s=3600, priority=-1).enqueue(2, when=WHEN)
    assert later.status.value == "scheduled"
    assert (await _job(shop, later.id))["priority"] == -1
    after = await build_report.options(depends_on=[first.id]).enqueue(days=1)
    assert after.status.value == "waiting"
    many = await send_welcome.enqueue_many(
        [{"user_id": i, "when": WHEN} for i in range(3)]
        + [send_welcome.options(idempotency_key="welcome-1").job(1, when=WHEN)]
    )
    assert [m.created for m in many] == [True, True, True, False]
    with pytest.raises(codity.ValidationError, match="priority must be between"):
        await send_welcome.options(priority=10**6).enqueue(1, when=WHEN)


async def test_flow_control_options_per_call(shop: TestDatabase) -> None:
    keyed = await count_words.options(concurrency_key="acct-9").enqueue(text="a", ref=uuid.uuid4())
    ref = uuid.uuid4()
    unique = send_welcome.options(unique_for_s=600)
    first = await unique.enqueue(5, when=WHEN)
    again = await unique.enqueue(5, when=WHEN)  # same arguments: the same job
    other = await unique.enqueue(6, when=WHEN)
    named = count_words.options(unique_for_s=600, unique_key="words", unique_states=["queued"])
    a = await named.enqueue(text="x", ref=ref)
    b = await named.enqueue(text="y", ref=ref)  # the key names the job, not the arguments
    assert (again.id, again.created) == (first.id, False)
    assert other.created
    assert (b.id, b.created) == (a.id, False)
    conn = await shop.connect()
    try:
        assert (
            await conn.fetchval("SELECT concurrency_key FROM jobs WHERE id = $1", keyed.id)
            == "acct-9"
        )
    finally:
        await conn.close()
    with pytest.raises(codity.ValidationError, match="need unique_for_s"):
        await send_welcome.options(unique_key="k").enqueue(1, when=WHEN)


async def test_the_decorators_unique_for_s_makes_every_enqueue_unique(shop: TestDatabase) -> None:
    first = await tasks_app.remind.enqueue(1)
    again = await tasks_app.remind.enqueue(1)
    other = await tasks_app.remind.enqueue(2)
    per_call = await tasks_app.remind.options(unique_key="r").enqueue(3)  # the default window
    assert (again.id, again.created) == (first.id, False)
    assert other.created
    assert per_call.created
    assert (await tasks_app.remind.options(unique_key="r").enqueue(4)).id == per_call.id


def _enqueue_from_sync_code() -> list[int]:
    made = send_welcome.enqueue_sync(7, when=WHEN)
    more = count_words.enqueue_many_sync([{"text": "a b", "ref": uuid.uuid4()}])
    return [made.id, more[0].id]


async def test_enqueue_sync_from_code_without_an_event_loop(shop: TestDatabase) -> None:
    ids = await asyncio.to_thread(_enqueue_from_sync_code)
    assert len(set(ids)) == 2
    assert await shop.job_counts() == {"queued": 2}
    await asyncio.to_thread(app.close)


async def _app_connections(db: TestDatabase) -> int:
    """Server connections of the App's pools (application_name codity-app) in this database."""
    conn = await db.connect()
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'codity-app' "
                "AND datname = current_database()"
            )
        )
    finally:
        await conn.close()


async def test_repeated_asyncio_run_holds_no_pool_between_calls(shop: TestDatabase) -> None:
    """`asyncio.run(task.enqueue(...))` per request: each loop's pool is closed when that loop
    shuts down, so the App does not keep one pool (and its connections) per dead loop."""

    def five_requests() -> list[int]:
        during = []
        for i in range(5):

            async def request(i: int = i) -> int:
                await send_welcome.enqueue(i, when=WHEN)
                return await _app_connections(shop)

            during.append(asyncio.run(request()))
        return during

    assert await asyncio.to_thread(five_requests) == [1, 1, 1, 1, 1]
    assert await _app_connections(shop) == 0
    assert app._pools == {}
    assert await shop.job_counts() == {"queued": 5}


# The dropped pool's sockets belong to the dead loop: only the garbage collector can close them,
# and it says so (a ResourceWarning from asyncpg's Connection.__del__), whenever a collection
# happens to run -- in the thread, in asyncio.run, or below -- so the filter spans the whole test.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
async def test_a_pool_whose_loop_was_closed_without_shutdown_is_dropped(
    shop: TestDatabase,
) -> None:
    """A loop closed without `shutdown_asyncgens` cannot close its pool any more: the next
    loop's enqueue drops it (its connections go with it), instead of holding it forever."""

    def manual_loop_then_asyncio_run() -> tuple[int, int]:
        loop = asyncio.new_event_loop()
        loop.run_until_complete(send_welcome.enqueue(1, when=WHEN))
        loop.close()
        held = len(app._pools)
        asyncio.run(send_welcome.enqueue(2, when=WHEN))
        return held, len(app._pools)

    assert await asyncio.to_thread(manual_loop_then_asyncio_run) == (1, 0)
    gc.collect()

    async def none_left() -> bool:
        return await _app_connections(shop) == 0

    await wait_for(none_left, timeout_s=10, what="the dropped pool's connections closed")


async def test_a_task_enqueue_stores_the_callers_trace_context(shop: TestDatabase) -> None:
    """codity[otel]: `await task.enqueue` and `task.enqueue_sync` (which runs on the App's
    background loop) both store the traceparent of the caller's current span."""
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("test.app")

    def traceparent(span: Any) -> str:
        made = span.get_span_context()
        return f"00-{made.trace_id:032x}-{made.span_id:016x}-{int(made.trace_flags):02x}"

    with tracer.start_as_current_span("request") as request:
        in_async = await send_welcome.enqueue(1, when=WHEN)

    def from_sync_code() -> tuple[int, str]:
        with tracer.start_as_current_span("sync request") as sync_request:
            return send_welcome.enqueue_sync(2, when=WHEN).id, traceparent(sync_request)

    in_sync, sync_parent = await asyncio.to_thread(from_sync_code)
    untraced = await send_welcome.enqueue(3, when=WHEN)
    conn = await shop.connect()
    try:
        stored = dict(await conn.fetch("SELECT id, trace_parent FROM jobs"))
    finally:
        await conn.close()
    assert stored == {in_async.id: traceparent(request), in_sync: sync_parent, untraced.id: None}
    await asyncio.to_thread(app.close)


async def test_a_queue_name_is_looked_up_in_the_apps_project(shop: TestDatabase) -> None:
    other = codity.App(shop.url, project="acme/other")

    @other.task(queue="emails")
    async def elsewhere() -> None: ...

    with pytest.raises(codity.QueueNotFoundError, match="acme/other/emails"):
        await elsewhere.enqueue()
    await other.aclose()


@pytest.fixture
def project_setting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Set CODITY_PROJECT for the test (the settings are read again)."""

    def set_project(value: str) -> None:
        monkeypatch.setenv("CODITY_PROJECT", value)
        get_settings.cache_clear()

    yield set_project
    monkeypatch.delenv("CODITY_PROJECT", raising=False)
    get_settings.cache_clear()


async def test_the_project_comes_from_the_argument_or_else_the_settings(
    shop: TestDatabase, project_setting: Callable[[str], None]
) -> None:
    # `emails` exists in acme/shop only: without a project it would be found anyway.
    project_setting("acme/other")
    from_settings = codity.App(shop.url)

    @from_settings.task(queue="emails", name="from-settings")
    async def elsewhere() -> None: ...

    assert from_settings.project == "acme/other"
    with pytest.raises(codity.QueueNotFoundError, match="acme/other/emails"):
        await elsewhere.enqueue()
    # The argument wins over the setting.
    from_argument = codity.App(shop.url, project="acme/shop")

    @from_argument.task(queue="emails", name="from-argument")
    async def here() -> None: ...

    made = await here.enqueue()
    project_setting("acme/shop")
    again = await elsewhere.enqueue()
    conn = await shop.connect()
    try:
        projects = await conn.fetch(
            "SELECT o.slug || '/' || p.slug AS project FROM jobs j JOIN queues q ON q.id = "
            "j.queue_id JOIN projects p ON p.id = q.project_id JOIN organizations o ON "
            "o.id = p.org_id WHERE j.id = ANY($1::bigint[])",
            [made.id, again.id],
        )
    finally:
        await conn.close()
    assert [r["project"] for r in projects] == ["acme/shop", "acme/shop"]
    await from_settings.aclose()
    await from_argument.aclose()


async def test_eager_mode_runs_inline_with_the_same_validation() -> None:
    with eager(app) as runner:
        done = await send_welcome.enqueue(5, when=WHEN.isoformat())  # a string, as JSON has it
        words = count_words.enqueue_sync(text="x y z", ref=str(uuid.UUID(int=1)))
        report = await build_report.enqueue(days=2)
        with pytest.raises(codity.ValidationError, match="valid integer"):
            await send_welcome.enqueue("five", when=WHEN)
        with pytest.raises(codity.ValidationError, match="delay_s must not be negative"):
            await send_welcome.options(delay_s=-1).enqueue(5, when=WHEN)
    assert done.status.value == "completed"
    assert [r.task.rsplit(".", 1)[-1] for r in runner.runs] == [
        "send_welcome",
        "count_words",
        "build",
    ]
    assert runner.runs[0].result == {"user": "5", "when_type": "datetime"}
    assert runner.runs[1].result == 3
    assert runner.runs[1].context.progress_reports == [(100, "counted")]
    assert runner.runs[2].context.progress_reports == [(50, "half")]
    assert words.id != report.id
    assert not app.eager


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


async def test_eager_enqueue_sync_of_an_async_task_inside_a_running_loop() -> None:
    """A sync helper called from async code: asyncio.run would refuse to run the task there;
    it runs on a loop of its own, with the caller's context variables."""
    local = codity.App("postgresql://unused")
    caller = asyncio.get_running_loop()

    @local.task(name="eager.in-a-loop")
    async def in_a_loop(n: int) -> dict[str, object]:
        await asyncio.sleep(0)
        return {
            "n": n,
            "request": REQUEST_ID.get(),
            "own_loop": asyncio.get_running_loop() is not caller,
        }

    REQUEST_ID.set("r-1")
    with eager(local) as runner:
        made = in_a_loop.enqueue_sync(3)
        (many,) = in_a_loop.enqueue_many_sync([{"n": 4}])
    assert (made.status.value, made.created, many.created) == ("completed", True, True)
    assert [r.result for r in runner.runs] == [
        {"n": 3, "request": "r-1", "own_loop": True},
        {"n": 4, "request": "r-1", "own_loop": True},
    ]


async def test_eager_mode_honours_idempotency_and_unique_keys() -> None:
    local = codity.App("postgresql://unused")

    @local.task(queue="emails", name="eager.welcome")
    async def welcome(user_id: int) -> int:
        return user_id * 10

    @local.task(queue="other", name="eager.other")
    def other(user_id: int) -> int:
        return user_id

    with eager(local) as runner:
        # An idempotency key: the repeat returns the first job and does not run (per queue).
        first = await welcome.options(idempotency_key="w-1").enqueue(1)
        again = await welcome.options(idempotency_key="w-1").enqueue(2)
        sync_again = welcome.options(idempotency_key="w-1").enqueue_sync(3)
        elsewhere = other.options(idempotency_key="w-1").enqueue_sync(1)
        assert (again.id, again.created) == (first.id, False)
        assert (sync_again.id, sync_again.created) == (first.id, False)
        assert (first.created, elsewhere.created) == (True, True)
        assert elsewhere.id != first.id
        assert [r.result for r in runner.runs] == [10, 1]

        # Unique by default matches unfinished jobs only: an eager job has finished, so the
        # same arguments run again (as after a worker finished the first one).
        plain = welcome.options(unique_for_s=600)
        a, b = await plain.enqueue(5), await plain.enqueue(5)
        assert (b.created, b.id != a.id) == (True, True)
        # Unless the states include `completed`: then the first job is returned.
        done_too = welcome.options(unique_for_s=600, unique_states=["completed"])
        c, d, e = await done_too.enqueue(7), await done_too.enqueue(7), await done_too.enqueue(8)
        assert (d.id, d.created) == (c.id, False)
        assert (e.created, e.id != c.id) == (True, True)
        # The unique key names the job, not its arguments.
        named = welcome.options(unique_for_s=600, unique_key="k", unique_states=["completed"])
        x, y = await named.enqueue(1), named.enqueue_sync(2)
        assert (y.id, y.created) == (x.id, False)
        # Within one call, a repeated key gets the call's first job, whatever the states.
        m1, m2 = await welcome.enqueue_many([plain.job(9), plain.job(9)])
        assert (m2.id, m2.created) == (m1.id, False)
        # Past the window, the key matches nothing.
        short = welcome.options(unique_for_s=0.05, unique_states=["completed"])
        f = await short.enqueue(11)
        await asyncio.sleep(0.1)
        g = await short.enqueue(11)
        assert (g.created, g.id != f.id) == (True, True)
    assert [r.result for r in runner.runs] == [10, 1, 50, 50, 70, 80, 10, 90, 110, 110]


def test_calling_a_task_calls_the_function() -> None:
    with pytest.raises(codity.ConfigurationError, match="takes a JobContext"):
        count_words(text="a", ref=uuid.uuid4())  # type: ignore[call-arg]


BAD_DEFAULTS = [
    ({"max_attempts": 0}, "max_attempts must be a positive integer, got 0"),
    ({"max_attempts": -2}, "max_attempts must be a positive integer, got -2"),
    ({"priority": 10**6}, "priority must be between"),
    ({"timeout_s": 0}, "timeout_s must be a positive number of seconds, got 0"),
    ({"timeout_s": -1.5}, "timeout_s must be a positive number of seconds, got -1.5"),
    ({"timeout_s": float("nan")}, "timeout_s must be a positive number of seconds"),
    ({"unique_for_s": 0}, "unique_for_s must be a number of seconds above 0"),
    ({"queue": ""}, "queue must be a queue's name"),
]


@pytest.mark.parametrize(("defaults", "message"), BAD_DEFAULTS)
def test_bad_task_defaults_are_refused_when_declared(
    defaults: dict[str, Any], message: str
) -> None:
    local = codity.App("postgresql://unused")
    with pytest.raises(codity.ConfigurationError, match=re.escape(message)):

        @local.task(name="defaults", **defaults)
        async def declared() -> None: ...

    assert local.tasks == {}
    assert local.registry.get("defaults") is None


async def test_a_bad_timeout_per_call_is_refused_at_enqueue() -> None:
    with eager(app), pytest.raises(codity.ValidationError, match="timeout_s must be a positive"):
        await send_welcome.options(timeout_s=-1).enqueue(1, when=WHEN)


def test_bad_task_definitions_are_refused_when_declared() -> None:
    local = codity.App("postgresql://unused")
    with pytest.raises(codity.ConfigurationError, match=r"\*args/\*\*kwargs"):

        @local.task()
        def loose(*args: int) -> None: ...

    with pytest.raises(codity.ConfigurationError, match="JobContext parameter must come first"):

        @local.task()
        def late(x: int, ctx: codity.JobContext) -> None: ...

    @local.task(name="same")
    def one() -> None: ...

    with pytest.raises(codity.ConfigurationError, match="two tasks are named 'same'"):

        @local.task(name="same")
        def two() -> None: ...
