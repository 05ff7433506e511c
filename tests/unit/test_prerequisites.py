"""A fault suite whose prerequisite is missing skips on a laptop and fails in CI."""

from __future__ import annotations

import pytest
from tests import pgbouncer
from tests.acceptance.services import own_cluster as own_cluster_module
from tests.acceptance.services.own_cluster import own_cluster
from tests.prerequisites import ENV, missing


def test_missing_skips_without_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no frobnicator"):
        missing("no frobnicator")


def test_missing_fails_under_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=rf"no frobnicator \[{ENV}=1\]"):
        missing("no frobnicator")


@pytest.mark.parametrize(("switch", "outcome"), [("", pytest.skip), ("1", pytest.fail)])
def test_own_cluster_without_pg_ctl(
    monkeypatch: pytest.MonkeyPatch, switch: str, outcome: object
) -> None:
    """The chaos, restart and outage suites all take their cluster from own_cluster()."""
    monkeypatch.setenv(ENV, switch)
    monkeypatch.setattr(own_cluster_module, "find_system_bin_dir", lambda: None)
    with pytest.raises(outcome.Exception, match="pg_ctl"), own_cluster():  # type: ignore[attr-defined]
        raise AssertionError("a cluster was started without pg_ctl")


@pytest.mark.parametrize(("switch", "outcome"), [("", pytest.skip), ("1", pytest.fail)])
def test_pgbouncer_suite_without_pgbouncer(
    monkeypatch: pytest.MonkeyPatch, switch: str, outcome: object
) -> None:
    monkeypatch.setenv(ENV, switch)
    monkeypatch.setattr(pgbouncer, "PGBOUNCER", "/nonexistent/pgbouncer")
    with pytest.raises(outcome.Exception, match="PGBOUNCER NOT INSTALLED"):  # type: ignore[attr-defined]
        pgbouncer.require()
