"""The pure parts of flow control: default unique keys and explain's rules."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from codity.domain.flow import Blocker, ExplainFacts, default_unique_key, explain
from codity.domain.states import JobStatus

NOW = datetime(2030, 1, 1, tzinfo=UTC)

QUEUED = ExplainFacts(
    status=JobStatus.QUEUED,
    run_at=NOW - timedelta(seconds=1),
    now=NOW,
    handler="h",
    concurrency_key=None,
    is_paused=False,
    concurrency_limit=None,
    key_concurrency_limit=None,
    rate_limit_count=None,
    rate_limit_period_ms=None,
    rate_limit_per_key=False,
    weight=1,
    waiting_on=[],
    queue_leased=0,
    queue_holders=[],
    key_leased=0,
    key_holders=[],
    rate_used=None,
    rate_next_at=None,
    ahead=3,
    live_workers=1,
    workers_with_handler=1,
    live_capacity=10,
    in_flight_by_project=[],
)


def codes(facts: ExplainFacts) -> list[Blocker]:
    return [f.code for f in explain(facts)]


def test_default_unique_key_ignores_key_order_but_not_values_or_handler() -> None:
    a = default_unique_key("h", {"a": 1, "b": [1, 2]})
    assert a == default_unique_key("h", {"b": [1, 2], "a": 1})
    assert a != default_unique_key("h", {"a": 2, "b": [1, 2]})
    assert a != default_unique_key("g", {"a": 1, "b": [1, 2]})
    assert a.startswith("sha256:")


@pytest.mark.parametrize("status", ["claimed", "running", "completed", "cancelled", "dead_letter"])
def test_a_job_that_runs_or_finished_has_nothing_to_explain(status: str) -> None:
    assert explain(replace(QUEUED, status=JobStatus(status))) == []


def test_nothing_in_the_way_is_claimable_with_the_jobs_ahead() -> None:
    (found,) = explain(QUEUED)
    assert (found.code, found.data) == (Blocker.CLAIMABLE, {"ahead": 3})


def test_every_reason_is_listed_not_just_the_first() -> None:
    facts = replace(
        QUEUED,
        is_paused=True,
        concurrency_limit=2,
        queue_leased=2,
        queue_holders=[7, 8],
        concurrency_key="k",
        key_concurrency_limit=1,
        key_leased=1,
        key_holders=[8],
        rate_limit_count=5,
        rate_limit_period_ms=1000,
        rate_used=5,
        rate_next_at=NOW + timedelta(milliseconds=300),
    )
    assert codes(facts) == [
        Blocker.QUEUE_PAUSED,
        Blocker.CONCURRENCY_LIMIT_FULL,
        Blocker.KEY_LIMIT_FULL,
        Blocker.RATE_LIMITED,
    ]


def test_limits_with_room_do_not_block() -> None:
    facts = replace(
        QUEUED, concurrency_limit=3, queue_leased=2, key_concurrency_limit=1,
        concurrency_key=None, key_leased=5, rate_limit_count=5, rate_used=4,
    )  # fmt: skip
    assert codes(facts) == [Blocker.CLAIMABLE]


def test_workers_missing_or_without_the_handler() -> None:
    assert codes(replace(QUEUED, live_workers=0, workers_with_handler=0)) == [
        Blocker.NO_LIVE_WORKER
    ]
    assert codes(replace(QUEUED, workers_with_handler=0)) == [Blocker.HANDLER_NOT_REGISTERED]


def test_fair_share_only_when_every_slot_is_taken_and_others_hold_some() -> None:
    others = [
        {"own": False, "in_flight": 8, "weight": 3},
        {"own": True, "in_flight": 2, "weight": 1},
    ]
    full = replace(QUEUED, live_capacity=10, in_flight_by_project=others)
    (found,) = explain(full)
    assert found.code is Blocker.FAIR_SHARE
    assert found.data == {
        "own": {"in_flight": 2, "weight": 1},
        "others": [{"in_flight": 8, "weight": 3}],
        "capacity": 10,
    }
    assert codes(replace(full, live_capacity=11)) == [Blocker.CLAIMABLE]  # a slot is free
    mine = [{"own": True, "in_flight": 10, "weight": 1}]
    assert codes(replace(full, in_flight_by_project=mine)) == [Blocker.CLAIMABLE]


def test_waiting_and_scheduled_jobs_are_not_judged_by_the_limits() -> None:
    waiting = replace(
        QUEUED, status=JobStatus.WAITING, waiting_on=[4, 5], concurrency_limit=1, queue_leased=1
    )
    assert codes(waiting) == [Blocker.WAITING_ON_DEPENDENCIES]
    later = NOW + timedelta(hours=1)
    scheduled = replace(QUEUED, status=JobStatus.SCHEDULED, run_at=later, is_paused=True)
    found = explain(scheduled)
    assert [f.code for f in found] == [Blocker.SCHEDULED, Blocker.QUEUE_PAUSED]
    assert found[0].data == {"run_at": later.isoformat()}
