"""The audit trail stores the client's address only when it is an IP address."""

from __future__ import annotations

import pytest

from codity.api.audit import _inet


@pytest.mark.parametrize(
    ("peer", "stored"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("::1", "::1"),
        ("testclient", None),  # Starlette's test client
        ("/run/codity.sock", None),  # a Unix-socket peer
        (None, None),
    ],
)
def test_only_ip_addresses_reach_the_inet_column(peer: str | None, stored: str | None) -> None:
    assert _inet(peer) == stored
