"""`email.send` against an aiosmtpd server started by the test on 127.0.0.1: plain, with AUTH,
and with STARTTLS; and the `codity up` sink writing messages to an outbox directory."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import uuid
from collections.abc import Iterator
from email import message_from_bytes
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from tests.factories import make_queue

from codity import core
from codity.cli.smtp_sink import smtp_sink
from codity.mail import parse_smtp_url, send
from codity.settings import get_settings
from codity.worker.context import JobContext
from codity.worker.handlers.email_send import build_message, email_send
from codity.worker.job_logger import JobLogger


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _auth(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (b"mailer", b"s3cret")
    return AuthResult(success=ok)


@pytest.fixture
def smtp_server() -> Iterator[tuple[Inbox, int]]:
    inbox, port = Inbox(), _port()
    controller = Controller(
        inbox, hostname="127.0.0.1", port=port, authenticator=_auth, auth_require_tls=False
    )
    controller.start()
    yield inbox, port
    controller.stop()


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a throwaway certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)


PAYLOAD = {"to": ["ops@example.test"], "subject": "Nightly report", "text": "All green."}


def context(payload: Any, *, db: Any = None, queue_id: uuid.UUID | None = None) -> JobContext:
    fence = core.Fence(job_id=1, worker_id=uuid.uuid4(), execution_seq=1)
    return JobContext(
        job_id=1, queue_id=queue_id or uuid.uuid4(), handler="email.send", payload=payload,
        attempt=1, max_attempts=3, execution_seq=1, deadline=None, logger=JobLogger(fence),
        cancelled=threading.Event(), db=db, _fence=fence,
    )  # fmt: skip


async def test_the_handler_delivers_with_auth_to_SMTP_URL(
    smtp_server: tuple[Inbox, int], monkeypatch: pytest.MonkeyPatch, pool: Any
) -> None:
    inbox, port = smtp_server
    monkeypatch.setenv("SMTP_URL", f"smtp://mailer:s3cret@127.0.0.1:{port}")
    get_settings.cache_clear()
    try:
        result = await email_send(context(PAYLOAD, db=pool, queue_id=await make_queue(pool)))
    finally:
        get_settings.cache_clear()
    assert result["recipients"] == 1
    ((_sender, recipients, raw),) = inbox.messages
    assert recipients == ["ops@example.test"]
    message = message_from_bytes(raw)
    assert message["Subject"] == "Nightly report"
    assert message.get_payload().strip() == "All green."


async def test_starttls(tls_files: tuple[str, str]) -> None:
    cert, key = tls_files
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    inbox, port = Inbox(), _port()
    controller = Controller(
        inbox, hostname="127.0.0.1", port=port, tls_context=context, require_starttls=True
    )
    controller.start()
    try:
        # verify=false: the throwaway certificate is self-signed
        send(
            parse_smtp_url(f"smtp://127.0.0.1:{port}?starttls=true&verify=false"),
            build_message(PAYLOAD),
        )
        with pytest.raises(Exception, match="STARTTLS"):  # the server refuses plain text
            send(parse_smtp_url(f"smtp://127.0.0.1:{port}"), build_message(PAYLOAD))
    finally:
        controller.stop()
    assert len(inbox.messages) == 1


async def test_the_local_sink_writes_each_message_to_the_outbox(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    with smtp_sink(outbox) as url:
        send(parse_smtp_url(url), build_message(PAYLOAD))
        send(parse_smtp_url(url), build_message({**PAYLOAD, "subject": "second"}))
    files = sorted(outbox.glob("*.eml"))
    assert len(files) == 2
    subjects = {message_from_bytes(f.read_bytes())["Subject"] for f in files}
    assert subjects == {"Nightly report", "second"}


def test_payload_validation() -> None:
    from codity.worker.handlers.basic import HandlerInputError

    for bad in ({}, {"to": "nobody", "text": "x"}, {"to": [], "text": "x"}, {"to": "a@b"}, [1]):
        with pytest.raises(HandlerInputError):
            build_message(bad)
