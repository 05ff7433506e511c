"""advance_cursors: where each queue's next claim starts, from what the last one found."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from codity.core import ClaimCursor, ClaimedJob, ClaimRound, advance_cursors
from codity.core.claim import DRY_CURSOR_LAG
from codity.core.epoch import to_epoch_us

NOW = datetime(2026, 12, 3, 18, 0, tzinfo=UTC)
WORKER = uuid.uuid4()
A, B, C = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def _job(job_id: int, queue_id: uuid.UUID, run_at: datetime, priority: int = 0) -> ClaimedJob:
    return ClaimedJob(
        job_id, queue_id, "h", None, 1, 3, 1, None, priority, WORKER, None, to_epoch_us(run_at)
    )


def test_a_queue_that_gave_jobs_continues_after_its_last_one() -> None:
    jobs = [_job(1, A, NOW), _job(2, A, NOW), _job(7, B, NOW, priority=3), _job(8, B, NOW, 3)]
    cursors: dict[uuid.UUID, ClaimCursor] = {}
    advance_cursors(cursors, ClaimRound(jobs))
    assert cursors == {A: ClaimCursor(0, NOW, 2), B: ClaimCursor(3, NOW, 8)}


def test_a_queue_that_ran_dry_moves_behind_the_claims_clock_at_its_priority() -> None:
    old = NOW - timedelta(minutes=5)
    cursors = {A: ClaimCursor(4, old, 10)}
    advance_cursors(cursors, ClaimRound([], ran_dry=(A, B), scanned_at=NOW))
    assert cursors == {
        A: ClaimCursor(4, NOW - DRY_CURSOR_LAG, 0),
        B: ClaimCursor(0, NOW - DRY_CURSOR_LAG, 0),
    }


def test_a_cursor_never_moves_back_and_a_queue_that_gave_jobs_keeps_its_last() -> None:
    recent = NOW - DRY_CURSOR_LAG / 2
    cursors = {A: ClaimCursor(0, recent, 5)}
    claimed = ClaimRound([_job(9, B, recent)], ran_dry=(A, B), scanned_at=NOW)
    advance_cursors(cursors, claimed)
    assert cursors == {A: ClaimCursor(0, recent, 5), B: ClaimCursor(0, recent, 9)}


def test_without_the_claims_clock_no_queue_is_moved_as_dry() -> None:
    cursors = {A: ClaimCursor(0, NOW - timedelta(hours=1), 1)}
    advance_cursors(cursors, ClaimRound([], ran_dry=(A, C)))  # claim_jobs_flow: no clock
    assert cursors == {A: ClaimCursor(0, NOW - timedelta(hours=1), 1)}
