"""Outgoing mail, shared by the `email.send` job handler (worker) and the API's verification and
invitation mails: one transport (SMTP_URL), one sender (EMAIL_FROM), one way to count
recipients. Outside the layers on purpose (like `codity.settings`): it touches no database and
imports only `codity.domain`, so the worker and the API can both use it.
"""

from codity.mail.message import (
    MAX_RECIPIENTS,
    RecipientsError,
    build_message,
    count_recipients,
    parse_recipients,
)
from codity.mail.smtp import SmtpTarget, parse_smtp_url, send

__all__ = [
    "MAX_RECIPIENTS",
    "RecipientsError",
    "SmtpTarget",
    "build_message",
    "count_recipients",
    "parse_recipients",
    "parse_smtp_url",
    "send",
]
