"""A local SMTP sink for `codity up`: accepts every message and writes it to `.codity/outbox/`.

So that `email.send` works on a laptop with no mail server, and what would have been sent can be
read as plain `.eml` files. Listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

from codity.settings import STATE_DIR

OUTBOX_DIR = STATE_DIR / "outbox"


class OutboxHandler:
    def __init__(self, outbox: Path) -> None:
        self.outbox = outbox

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's hook name)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        path = self.outbox / f"{stamp}-{uuid.uuid4().hex[:8]}.eml"
        content = envelope.original_content or envelope.content or b""
        if isinstance(content, str):
            content = content.encode()
        header = (
            f"X-Codity-Envelope-From: {envelope.mail_from}\r\n"
            f"X-Codity-Envelope-To: {', '.join(envelope.rcpt_tos)}\r\n"
        ).encode()
        path.write_bytes(header + content)
        return "250 Message accepted for delivery"


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def smtp_sink(outbox: Path = OUTBOX_DIR, host: str = "127.0.0.1") -> Iterator[str]:
    """Run the sink in a background thread; yields the SMTP_URL that reaches it."""
    outbox.mkdir(parents=True, exist_ok=True)
    port = _free_port(host)
    controller = Controller(OutboxHandler(outbox), hostname=host, port=port)
    controller.start()
    try:
        yield f"smtp://{host}:{port}"
    finally:
        controller.stop()
