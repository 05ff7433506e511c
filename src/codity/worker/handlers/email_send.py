"""`email.send`: deliver one message over SMTP to SMTP_URL (STARTTLS, implicit TLS, AUTH).

Payload: `{"to": "a@b" | [...], "subject": "...", "text": "...", "html": "...", "from": "..."}`.
smtplib is blocking, so the send runs in a thread; the job's deadline bounds the socket timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

from codity.settings import get_settings
from codity.worker.context import JobContext
from codity.worker.handlers.basic import HandlerInputError
from codity.worker.handlers.smtp_url import SmtpTarget, parse_smtp_url
from codity.worker.registry import handler

DEFAULT_SENDER = "codity@localhost"
MAX_RECIPIENTS = 50


def build_message(payload: Any) -> EmailMessage:
    if not isinstance(payload, dict):
        raise HandlerInputError("payload must be a JSON object with 'to', 'subject' and 'text'")
    to = payload.get("to")
    recipients = [to] if isinstance(to, str) else to
    if (
        not isinstance(recipients, list)
        or not recipients
        or not all(isinstance(r, str) and "@" in r for r in recipients)
    ):
        raise HandlerInputError("payload.to must be an address or a non-empty list of addresses")
    if len(recipients) > MAX_RECIPIENTS:
        raise HandlerInputError(f"at most {MAX_RECIPIENTS} recipients per message")
    subject, text, html = payload.get("subject", ""), payload.get("text"), payload.get("html")
    if not isinstance(subject, str) or not (isinstance(text, str) or isinstance(html, str)):
        raise HandlerInputError("payload needs a string 'subject' and a 'text' or 'html' body")
    message = EmailMessage()
    message["From"] = str(payload.get("from") or DEFAULT_SENDER)
    message["To"] = ", ".join(recipients)
    message["Subject"] = subject
    message["Message-ID"] = make_msgid(domain="codity.local")
    message.set_content(text if isinstance(text, str) else "")
    if isinstance(html, str):
        message.add_alternative(html, subtype="html")
    return message


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


@handler("email.send")
async def email_send(ctx: JobContext) -> dict[str, Any]:
    url = get_settings().smtp_url
    if not url:
        raise HandlerInputError("SMTP_URL is not set; email.send has nowhere to deliver to")
    target = parse_smtp_url(url)
    left = ctx.time_left()
    if left is not None:
        target = dataclasses.replace(target, timeout_s=max(0.1, min(target.timeout_s, left)))
    message = build_message(ctx.payload)
    recipients = message["To"].count("@")
    await asyncio.to_thread(send, target, message)
    ctx.logger.info("email sent", recipients=recipients, smtp_host=target.host)
    return {"message_id": message["Message-ID"], "recipients": recipients}
