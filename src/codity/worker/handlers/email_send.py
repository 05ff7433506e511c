"""`email.send`: deliver one message over SMTP to SMTP_URL (STARTTLS, implicit TLS, AUTH).

Payload: `{"to": "a@b" | [...], "cc": [...], "bcc": [...], "subject": "...", "text": "...",
"html": "...", "reply_to": "..."}`.

Not an open relay: the sender is always the deployment's EMAIL_FROM (a payload `from` that
differs is refused, so a tenant cannot spoof anyone); recipients are counted as a mail server
counts them (`codity.mail`: each field parsed with `email.utils.getaddresses`, so one `to` item
holding "a@x, b@y" counts twice), at most MAX_RECIPIENTS per message; and each project may
reach at most EMAIL_RECIPIENTS_PER_DAY recipients per UTC day (a counter in PostgreSQL,
`codity.core.quotas`, shared by every worker). smtplib is blocking, so the send runs in a
thread; the job's deadline bounds the socket timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
from email.message import EmailMessage
from typing import Any

from codity import mail
from codity.core import quotas, tenants
from codity.settings import Settings, get_settings
from codity.worker.context import JobContext
from codity.worker.handlers.basic import HandlerInputError
from codity.worker.registry import handler

MAX_RECIPIENTS = mail.MAX_RECIPIENTS


def _addresses(payload: dict[str, Any], field: str) -> list[str]:
    value = payload.get(field)
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise HandlerInputError(f"payload.{field} must be an address or a list of addresses")
    return items


def build_message(payload: Any, settings: Settings | None = None) -> EmailMessage:
    """The message a payload describes, from EMAIL_FROM. HandlerInputError for a payload that
    names another sender, has no or too many recipients, or no body."""
    settings = settings or get_settings()
    if not isinstance(payload, dict):
        raise HandlerInputError("payload must be a JSON object with 'to', 'subject' and 'text'")
    sender = payload.get("from")
    if sender is not None and sender != settings.email_from:
        raise HandlerInputError(
            "payload.from is not accepted: every mail is sent from the deployment's EMAIL_FROM "
            "(use reply_to for answers)"
        )
    subject, text, html = payload.get("subject", ""), payload.get("text"), payload.get("html")
    if not isinstance(subject, str) or not (isinstance(text, str) or isinstance(html, str)):
        raise HandlerInputError("payload needs a string 'subject' and a 'text' or 'html' body")
    reply_to = payload.get("reply_to")
    if reply_to is not None and not isinstance(reply_to, str):
        raise HandlerInputError("payload.reply_to must be one address")
    try:
        return mail.build_message(
            sender=settings.email_from,
            to=_addresses(payload, "to"),
            cc=_addresses(payload, "cc"),
            bcc=_addresses(payload, "bcc"),
            subject=subject,
            text=text if isinstance(text, str) else None,
            html=html if isinstance(html, str) else None,
            reply_to=reply_to,
        )
    except mail.RecipientsError as exc:
        raise HandlerInputError(str(exc)) from None


def recipients_of(message: EmailMessage) -> int:
    return mail.count_recipients(
        message.get_all("To", []), message.get_all("Cc", []), message.get_all("Bcc", [])
    )


async def _reserve_recipients(ctx: JobContext, settings: Settings, count: int) -> str | None:
    """Count the recipients against the project's daily quota; the key to refund, or None when
    the queue is gone. HandlerInputError when today's quota would be exceeded."""
    tenant = await tenants.tenant_of_queue(ctx.db, ctx.queue_id)
    if tenant is None:
        return None
    key = quotas.email_recipients_key(tenant.project_id)
    decision = await quotas.consume(
        ctx.db,
        key,
        cost=count,
        limit=settings.email_recipients_per_day,
        window_s=quotas.seconds_until_utc_midnight(),
    )
    if not decision.allowed:
        raise HandlerInputError(
            f"the project's mail quota for today is reached: {decision.count} of "
            f"{settings.email_recipients_per_day} recipients used (EMAIL_RECIPIENTS_PER_DAY)"
        )
    return key


@handler("email.send")
async def email_send(ctx: JobContext) -> dict[str, Any]:
    settings = get_settings()
    if not settings.smtp_url:
        raise HandlerInputError("SMTP_URL is not set; email.send has nowhere to deliver to")
    target = mail.parse_smtp_url(settings.smtp_url)
    left = ctx.time_left()
    if left is not None:
        target = dataclasses.replace(target, timeout_s=max(0.1, min(target.timeout_s, left)))
    message = build_message(ctx.payload, settings)
    recipients = recipients_of(message)
    key = await _reserve_recipients(ctx, settings, recipients)
    try:
        await asyncio.to_thread(mail.send, target, message)
    except BaseException:
        if key is not None:  # not delivered: the recipients were not reached after all
            await quotas.refund(ctx.db, key, cost=recipients)
        raise
    ctx.logger.info("email sent", recipients=recipients, smtp_host=target.host)
    return {"message_id": message["Message-ID"], "recipients": recipients}
