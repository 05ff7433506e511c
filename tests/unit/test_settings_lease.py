"""A heartbeat slower than the lease is refused at start-up, with the two settings named."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from codity.settings import Settings


@pytest.mark.parametrize("heartbeat_ms", [30_000, 45_000])
def test_a_heartbeat_not_shorter_than_the_lease_is_refused(heartbeat_ms: int) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(WORKER_HEARTBEAT_MS=heartbeat_ms, WORKER_LEASE_MS=30_000)  # type: ignore[call-arg]
    assert "WORKER_HEARTBEAT_MS" in str(caught.value)
    assert "WORKER_LEASE_MS" in str(caught.value)


def test_a_heartbeat_shorter_than_the_lease_is_accepted() -> None:
    s = Settings(WORKER_HEARTBEAT_MS=5_000, WORKER_LEASE_MS=30_000)  # type: ignore[call-arg]
    assert (s.worker_heartbeat_ms, s.worker_lease_ms) == (5_000, 30_000)
