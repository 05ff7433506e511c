"""A message and its recipients, counted the way a mail server will count them.

A `to` item may itself hold several addresses ("a@x, b@y", or "Name <a@x>, b@y"): counting list
items would let 50 items carry 150 recipients. Every address field is parsed with
`email.utils.getaddresses` (what the standard library's own mail handling uses), and the total
across To, Cc and Bcc is what the cap and the quotas count.
"""

from __future__ import annotations

from collections.abc import Iterable
from email.message import EmailMessage
from email.utils import formataddr, getaddresses, make_msgid

#: Recipients (To + Cc + Bcc) of one message.
MAX_RECIPIENTS = 50


class RecipientsError(ValueError):
    """The recipients are malformed or too many."""


def parse_recipients(values: Iterable[str]) -> list[str]:
    """Every address in `values` (each may be a list itself), as bare `local@domain`."""
    found: list[str] = []
    for value in values:
        if not isinstance(value, str):
            raise RecipientsError("each recipient must be a string")
        if "\n" in value or "\r" in value:
            raise RecipientsError("a recipient must not contain a line break")
        for _name, address in getaddresses([value]):
            local, at, domain = address.rpartition("@")
            if not at or not local or not domain or " " in address:
                raise RecipientsError(f"not an email address: {address or value!r}")
            found.append(address)
    return found


def count_recipients(*fields: Iterable[str]) -> int:
    return sum(len(parse_recipients(f)) for f in fields)


def build_message(
    *,
    sender: str,
    to: list[str],
    subject: str,
    text: str | None = None,
    html: str | None = None,
    cc: list[str] | None = None,
    bcc: list[str] | None = None,
    reply_to: str | None = None,
) -> EmailMessage:
    """A message from `sender` (the deployment's EMAIL_FROM) to at most MAX_RECIPIENTS people."""
    recipients = [*parse_recipients(to), *parse_recipients(cc or []), *parse_recipients(bcc or [])]
    if not parse_recipients(to):
        raise RecipientsError("a message needs at least one recipient in 'to'")
    if len(recipients) > MAX_RECIPIENTS:
        raise RecipientsError(
            f"at most {MAX_RECIPIENTS} recipients per message (To, Cc and Bcc together), "
            f"got {len(recipients)}"
        )
    if "\n" in subject or "\r" in subject:
        raise RecipientsError("the subject must not contain a line break")
    message = EmailMessage()
    message["From"] = sender
    message["To"] = ", ".join(formataddr(("", a)) for a in parse_recipients(to))
    if cc:
        message["Cc"] = ", ".join(parse_recipients(cc))
    if bcc:
        # Bcc travels in the envelope only: send_message() drops the header before sending.
        message["Bcc"] = ", ".join(parse_recipients(bcc))
    if reply_to:
        message["Reply-To"] = ", ".join(parse_recipients([reply_to]))
    message["Subject"] = subject
    message["Message-ID"] = make_msgid(domain="codity.local")
    message.set_content(text if text is not None else "")
    if html is not None:
        message.add_alternative(html, subtype="html")
    return message
