"""Running a long-lived service from the CLI: logging, and SIGTERM/SIGINT as a stop request."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from codity.cli._loop import run
from codity.logs import configure_logging
from codity.settings import Settings


def setup_logging(settings: Settings, service: str) -> None:
    configure_logging(settings.log_level, settings.log_format, service=service)
    # asyncpg's pool logs a full traceback each time it fails to refill during an outage; the
    # services already log one structured line per failed attempt with the retry delay.
    logging.getLogger("asyncpg.pool").setLevel(logging.CRITICAL)


def run_until_signalled(main: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
    """Run `main(stop)`; the first SIGTERM/SIGINT sets `stop` (graceful), later ones are noted."""

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        log = structlog.get_logger("codity")

        def request_stop(signame: str) -> None:
            if stop.is_set():
                log.info("already stopping", signal=signame)
                return
            log.info("stop requested", signal=signame)
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, request_stop, sig.name)
        await main(stop)

    run(runner())
