"""LoopService: the base owns timing, survival and shutdown for every scheduler loop."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from codity.core.loop_service import LoopService


class Scripted(LoopService):
    name = "scripted"

    def __init__(self, script: list[object], interval_ms: int, stop: asyncio.Event) -> None:
        super().__init__(None, interval_ms=interval_ms)
        self.script = script
        self.stop = stop
        self.calls = 0

    async def run_once(self) -> bool:
        self.calls += 1
        if not self.script:
            self.stop.set()
            return False
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return bool(step)


async def test_outages_and_bugs_do_not_end_the_loop() -> None:
    stop = asyncio.Event()
    loop = Scripted(
        [asyncpg.ConnectionDoesNotExistError("gone"), ValueError("a bug"), False],
        interval_ms=10,
        stop=stop,
    )
    await asyncio.wait_for(loop.run(stop), timeout=5)
    assert loop.calls == 4  # error, error, one success, then the script asks to stop
    assert loop.errors == 2
    assert loop.iterations == 2


async def test_a_full_batch_runs_again_without_waiting_for_the_tick() -> None:
    stop = asyncio.Event()
    loop = Scripted([True, True, True], interval_ms=60_000, stop=stop)
    started = time.monotonic()
    await asyncio.wait_for(loop.run(stop), timeout=5)
    assert loop.calls == 4
    assert time.monotonic() - started < 30  # a 60 s tick was never waited for (half: any load)


async def test_stop_interrupts_the_wait_between_ticks() -> None:
    stop = asyncio.Event()
    loop = Scripted([False] * 100, interval_ms=60_000, stop=stop)
    task = asyncio.create_task(loop.run(stop))
    await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, timeout=1)
    assert loop.calls == 1


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_ms must be positive"):
        Scripted([], interval_ms=0, stop=asyncio.Event())


def _secondary_error(*, keep_chain: bool) -> RuntimeError:
    """A RuntimeError raised while handling a lost connection, as asyncpg's rollback does."""
    try:
        raise asyncpg.ConnectionDoesNotExistError("connection was closed")
    except asyncpg.ConnectionDoesNotExistError as lost:
        secondary = RuntimeError("cannot switch to state 15")
        if keep_chain:
            secondary.__context__ = lost
        return secondary


def test_an_outage_hidden_behind_a_secondary_error_is_still_an_outage() -> None:
    from codity.db.reconnect import is_transient

    assert is_transient(_secondary_error(keep_chain=True))
    assert not is_transient(_secondary_error(keep_chain=False))
    assert not is_transient(ValueError("a bug"))
