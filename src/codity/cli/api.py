"""`codity api`: the REST API under uvicorn (the app is built by `codity.api.app.app_factory`)."""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import Annotated

import typer
import uvicorn

from codity.cli._common import database_url, friendly_errors, settings
from codity.cli._service import setup_logging
from codity.settings import Settings, get_settings


class GracefulServer(uvicorn.Server):
    """Exit 0 after a SIGTERM-initiated graceful shutdown, as the worker and scheduler do.

    (uvicorn re-raises the captured SIGTERM once it has shut down, so the exit status would
    read as "killed" even though every request finished.)"""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if sig == signal.SIGTERM and sig in self._captured_signals:
            self._captured_signals.remove(sig)


@friendly_errors
def api_command(
    host: Annotated[str | None, typer.Option(help="Interface to bind (API_HOST).")] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="Port to listen on (API_PORT, 3000).")
    ] = None,
) -> None:
    """Serve the REST API: /api/v1 (Swagger UI at /api/v1/docs), /healthz, /readyz, /metrics."""
    cfg = settings()
    setup_logging(cfg, "api")
    with database_url() as url:
        # The factory reads settings from the environment: hand it the URL actually in use
        # (the embedded server's when DATABASE_URL is unset).
        os.environ["DATABASE_URL"] = url
        get_settings.cache_clear()
        GracefulServer(server_config(cfg, host=host, port=port)).run()


def server_config(
    cfg: Settings, *, host: str | None = None, port: int | None = None
) -> uvicorn.Config:
    """How `codity api` serves the app (the factory reads its settings from the environment)."""
    return uvicorn.Config(
        "codity.api.app:app_factory",
        factory=True,
        host=host or cfg.api_host,
        port=port or cfg.api_port,
        access_log=False,  # the app writes its own structured access log with request ids
        log_level=cfg.log_level.lower(),
        server_header=False,
        # The client address (rate limits, audit rows) comes from X-Forwarded-For only when
        # the peer is one of these (`codity web`, your reverse proxy); anyone else's
        # forwarding headers are ignored.
        proxy_headers=True,
        forwarded_allow_ips=cfg.trusted_proxy_list,
    )
