"""The handler logger is bounded per attempt and redacts like the service logs."""

from __future__ import annotations

import uuid

from codity import core
from codity.worker.job_logger import MAX_ENTRIES_PER_ATTEMPT, MAX_MESSAGE_BYTES, JobLogger


def logger() -> JobLogger:
    return JobLogger(core.Fence(job_id=1, worker_id=uuid.uuid4(), execution_seq=1))


def test_payload_and_secret_values_are_redacted() -> None:
    log = logger()
    log.info("calling", password="hunter2", payload={"card": "4111"}, api_token="t0k", count=3)
    (entry,) = log._take(final=False)
    assert entry.fields["password"] == "[redacted]"
    assert entry.fields["api_token"] == "[redacted]"
    assert entry.fields["payload"] == {"size": 16, "keys": ["card"]}
    assert entry.fields["count"] == 3
    assert "hunter2" not in repr(entry)
    assert "4111" not in repr(entry)


def test_entries_per_attempt_are_bounded_and_the_drop_is_reported_once() -> None:
    log = logger()
    for i in range(MAX_ENTRIES_PER_ATTEMPT + 25):
        log.info(f"line {i}")
    entries = log._take(final=True)
    assert len(entries) == MAX_ENTRIES_PER_ATTEMPT + 1
    assert entries[-1].level == "warning"
    assert entries[-1].fields == {"dropped": 25}
    assert log._take(final=True) == []


def test_long_messages_are_cut_to_the_column_limit() -> None:
    log = logger()
    log.error("é" * MAX_MESSAGE_BYTES)
    (entry,) = log._take(final=False)
    assert len(entry.message.encode()) <= MAX_MESSAGE_BYTES
    assert entry.message.endswith("...")


def test_unknown_levels_become_info_and_unserialisable_fields_are_named_not_dumped() -> None:
    log = logger()
    log.log("shout", "x", thing=object())
    (entry,) = log._take(final=False)
    assert entry.level == "info"
    assert isinstance(entry.fields["thing"], str)  # rendered with str(), never a crash
