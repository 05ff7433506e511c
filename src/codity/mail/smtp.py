"""The SMTP transport: SMTP_URL, parsed (`smtp://user:pass@host:587?starttls=true` or
`smtps://host:465` for implicit TLS), and a blocking send (run it in a thread)."""

from __future__ import annotations

import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from urllib.parse import parse_qs, unquote, urlsplit

from codity.domain.errors import ConfigurationError

_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class SmtpTarget:
    host: str
    port: int
    implicit_tls: bool = False
    starttls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    #: Verify the server certificate (turn off only for a local test server).
    verify: bool = True
    timeout_s: float = 30.0


def parse_smtp_url(url: str) -> SmtpTarget:
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps"):
        raise ConfigurationError("SMTP_URL must start with smtp:// or smtps://")
    if not parts.hostname:
        raise ConfigurationError("SMTP_URL has no host")
    query = {k: v[-1].lower() for k, v in parse_qs(parts.query).items()}
    implicit = parts.scheme == "smtps"
    try:
        port = parts.port or (465 if implicit else 25)
    except ValueError as exc:
        raise ConfigurationError(f"SMTP_URL has an invalid port: {exc}") from None
    return SmtpTarget(
        host=parts.hostname,
        port=port,
        implicit_tls=implicit,
        starttls=not implicit and query.get("starttls", "false") in _TRUE,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        verify=query.get("verify", "true") in _TRUE,
        timeout_s=float(query.get("timeout", "30")),
    )


def send(target: SmtpTarget, message: EmailMessage) -> None:
    """Blocking send; call it in a thread."""
    context = ssl.create_default_context()
    if not target.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    client: smtplib.SMTP
    if target.implicit_tls:
        client = smtplib.SMTP_SSL(
            target.host, target.port, timeout=target.timeout_s, context=context
        )
    else:
        client = smtplib.SMTP(target.host, target.port, timeout=target.timeout_s)
    with client:
        client.ehlo()
        if target.starttls:
            client.starttls(context=context)
            client.ehlo()
        if target.username:
            client.login(target.username, target.password or "")
        client.send_message(message)
