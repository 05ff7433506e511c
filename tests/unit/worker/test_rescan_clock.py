"""The producer's full reads of the claim index (no cursors): once a second, but never more than
1/RESCAN_COST_SHARE of its time, so a read slowed by a held snapshot cannot take over every claim
(`codity bench xmin` measures the drain it protects)."""

from __future__ import annotations

from codity.worker.producer import CURSOR_RESCAN_S, RESCAN_COST_SHARE, RescanClock


def test_the_first_claim_reads_from_the_front() -> None:
    assert RescanClock().due(0.0)


def test_a_fast_full_read_comes_back_once_a_second() -> None:
    clock = RescanClock()
    clock.ran(started=100.0, took_s=0.003)
    assert not clock.due(100.0 + CURSOR_RESCAN_S - 0.01)
    assert clock.due(100.0 + CURSOR_RESCAN_S)


def test_a_slow_full_read_pushes_the_next_one_back_in_proportion() -> None:
    """A read that took 1.5 s (a minute of dead entries under a held snapshot): the next one
    comes RESCAN_COST_SHARE x 1.5 s after it began, not a second later, when it would still be
    the cost of nearly every claim."""
    clock = RescanClock()
    clock.ran(started=100.0, took_s=1.5)
    assert not clock.due(101.0)
    assert not clock.due(100.0 + RESCAN_COST_SHARE * 1.5 - 0.01)
    assert clock.due(100.0 + RESCAN_COST_SHARE * 1.5)
    clock.ran(started=130.0, took_s=0.002)  # the snapshot ended, vacuum caught up
    assert clock.due(130.0 + CURSOR_RESCAN_S)
