"""Which errors mean "the database is away, try again" (`is_transient`): narrow on purpose, since
a bug retried as if it were an outage would loop for ever instead of failing loudly."""

from __future__ import annotations

import asyncpg
import pytest

from codity.db.reconnect import is_transient
from codity.domain.errors import DatabaseUnavailableError


@pytest.mark.parametrize(
    "exc",
    [
        # a connection lost at an odd moment of asyncpg's protocol (seen under the chaos suite)
        asyncpg.InternalClientError("unexpected connection_lost() call"),
        asyncpg.InternalClientError(
            "cannot switch to state 12; another operation (2) is in progress"
        ),
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.InterfaceError("connection is closed"),
        asyncpg.AdminShutdownError("terminating connection due to administrator command"),
        ConnectionRefusedError(111, "Connect call failed"),
        DatabaseUnavailableError("cannot connect to PostgreSQL"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_outage_is_transient(exc: BaseException) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        asyncpg.InternalClientError("got result for unknown protocol state 3"),
        asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
        asyncpg.UndefinedTableError('relation "nope" does not exist'),
        ValueError("a bug"),
    ],
    ids=lambda e: str(e)[:30],
)
def test_a_bug_is_not_transient(exc: BaseException) -> None:
    assert not is_transient(exc)
