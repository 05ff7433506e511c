"""The API's own mail: email verification and invitations, through the same transport as the
`email.send` handler (`codity.mail`: SMTP_URL, from EMAIL_FROM).

Sending never decides a request's answer: registration must answer the same whether or not a
mail could be sent (or which mail), so a failure is logged (without the link: it is a secret)
and the person can ask for another mail.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlencode

import structlog

from codity import mail
from codity.settings import Settings

log = structlog.get_logger("codity.api.mailer")


def link(settings: Settings, path: str, token: str) -> str:
    """A dashboard URL carrying a token: `{PUBLIC_URL}{path}?token=...`."""
    return f"{settings.public_url.rstrip('/')}{path}?{urlencode({'token': token})}"


async def send(settings: Settings, *, to: str, subject: str, text: str, kind: str) -> bool:
    """Deliver one message; True when the SMTP server accepted it."""
    if not settings.smtp_url:
        log.warning("mail_not_sent", kind=kind, reason="SMTP_URL is not set")
        return False
    try:
        target = mail.parse_smtp_url(settings.smtp_url)
        message = mail.build_message(
            sender=settings.email_from, to=[to], subject=subject, text=text
        )
        await asyncio.to_thread(mail.send, target, message)
    except Exception as exc:  # any transport failure: logged, never the request's answer
        log.warning("mail_not_sent", kind=kind, error_type=type(exc).__name__)
        return False
    log.info("mail_sent", kind=kind)
    return True


VERIFY_SUBJECT = "Confirm your email address for Codity"
VERIFY_TEXT = """Hello,

Someone (hopefully you) created a Codity account with this address. Open this link to confirm
it, then sign in:

{link}

The link works once and expires in {hours} hours. If this was not you, ignore this mail: the
account cannot be used until the address is confirmed.
"""

ALREADY_REGISTERED_SUBJECT = "Someone tried to create a Codity account with your address"
ALREADY_REGISTERED_TEXT = """Hello,

Someone tried to create a new Codity account with this address, which already has one. Nothing
was changed. If it was you, sign in at {url} instead.

If your address is not confirmed yet, here is a new confirmation link (it works once and
expires in {hours} hours):

{link}
"""

INVITE_SUBJECT = "You are invited to {org} on Codity"
INVITE_TEXT = """Hello,

{inviter} invited you to the organisation "{org}" on Codity as {role}.

To accept, sign in (or create an account) with this address, {email}, confirm it, and open:

{link}

The invitation works once and expires in {days} days.
"""
