"""High 2 — `email.send` was an open relay with sender spoofing.

Before: `from` was free, and a `to` item could itself be a comma-separated list, so 50 items
carried 150 recipients (about 3,000 in a 64 KB payload). Now: the sender is always EMAIL_FROM;
recipients are counted with `email.utils.getaddresses` over To, Cc and Bcc and capped at 50 per
message; each project may reach EMAIL_RECIPIENTS_PER_DAY recipients per UTC day (a counter in
PostgreSQL shared by every worker). Delivery is real: an SMTP sink on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from email import message_from_bytes
from typing import Any

import pytest
from tests.factories import make_queue
from tests.integration.worker.test_worker_email import Inbox, _port, context

from codity.mail import MAX_RECIPIENTS
from codity.settings import get_settings
from codity.worker.handlers.basic import HandlerInputError
from codity.worker.handlers.email_send import build_message, email_send, recipients_of

SENDER = "Codity <robot@codity.example>"


@pytest.fixture
def relay(monkeypatch: pytest.MonkeyPatch) -> Iterator[Inbox]:
    from aiosmtpd.controller import Controller

    inbox, port = Inbox(), _port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    monkeypatch.setenv("SMTP_URL", f"smtp://127.0.0.1:{port}")
    monkeypatch.setenv("EMAIL_FROM", SENDER)
    monkeypatch.setenv("EMAIL_RECIPIENTS_PER_DAY", "10")
    get_settings.cache_clear()
    yield inbox
    get_settings.cache_clear()
    controller.stop()


async def test_the_sender_is_always_email_from(relay: Inbox, pool: Any) -> None:
    """Break it: put `payload.get("from") or EMAIL_FROM` back as the From header."""
    queue = await make_queue(pool)
    with pytest.raises(HandlerInputError, match="EMAIL_FROM"):
        await email_send(
            context(
                {"to": "a@example.test", "from": "ceo@bank.example", "subject": "s", "text": "t"},
                db=pool,
                queue_id=queue,
            )
        )
    await email_send(
        context({"to": "a@example.test", "subject": "s", "text": "t"}, db=pool, queue_id=queue)
    )
    ((envelope_from, _to, raw),) = relay.messages
    assert message_from_bytes(raw)["From"] == SENDER
    assert envelope_from == "robot@codity.example"


def test_recipients_are_counted_as_a_mail_server_counts_them(relay: Inbox) -> None:
    """Three addresses in one `to` item count three. Break it: count list items again."""
    message = build_message(
        {
            "to": ["a@x.test, b@x.test", "Carl <c@x.test>"],
            "cc": "d@x.test",
            "bcc": ["e@x.test"],
            "subject": "s",
            "text": "t",
        }
    )
    assert recipients_of(message) == 5
    fifty_items_of_three = [f"a{i}@x.test, b{i}@x.test, c{i}@x.test" for i in range(50)]
    with pytest.raises(HandlerInputError, match=f"at most {MAX_RECIPIENTS} recipients"):
        build_message({"to": fifty_items_of_three, "subject": "s", "text": "t"})
    with pytest.raises(HandlerInputError, match="at most"):
        build_message(
            {"to": "a@x.test", "bcc": [f"b{i}@x.test" for i in range(50)], "subject": "s",
             "text": "t"}
        )  # fmt: skip
    with pytest.raises(HandlerInputError, match="line break"):
        build_message({"to": "a@x.test\r\nBcc: z@evil.test", "subject": "s", "text": "t"})


async def test_each_project_has_a_daily_recipient_quota(relay: Inbox, pool: Any) -> None:
    """Break it: skip _reserve_recipients in the handler; the 11th recipient gets through."""
    queue = await make_queue(pool)
    other_project_queue = await make_queue(pool)
    eight = {"to": [f"r{i}@x.test" for i in range(8)], "subject": "s", "text": "t"}
    three = {"to": ["a@x.test", "b@x.test", "c@x.test"], "subject": "s", "text": "t"}
    assert (await email_send(context(eight, db=pool, queue_id=queue)))["recipients"] == 8
    with pytest.raises(HandlerInputError, match="quota"):
        await email_send(context(three, db=pool, queue_id=queue))  # 11 > 10: refused whole
    assert len(relay.messages) == 1  # nothing was sent for the refused job
    two = {"to": ["a@x.test", "b@x.test"], "subject": "s", "text": "t"}
    await email_send(context(two, db=pool, queue_id=queue))  # 10: still fits
    # Another project has its own quota.
    await email_send(context(three, db=pool, queue_id=other_project_queue))
    counted = await pool.fetch("SELECT key, count FROM rate_limit_buckets ORDER BY count DESC")
    assert [r["count"] for r in counted] == [10, 3]
    assert all(r["key"].startswith("email:project:") for r in counted)


async def test_a_failed_delivery_gives_the_recipients_back(
    monkeypatch: pytest.MonkeyPatch, pool: Any
) -> None:
    monkeypatch.setenv("SMTP_URL", f"smtp://127.0.0.1:{_port()}")  # nothing listens there
    monkeypatch.setenv("EMAIL_RECIPIENTS_PER_DAY", "10")
    get_settings.cache_clear()
    try:
        queue = await make_queue(pool)
        with pytest.raises(OSError):
            await email_send(
                context({"to": "a@x.test", "subject": "s", "text": "t"}, db=pool, queue_id=queue)
            )
    finally:
        get_settings.cache_clear()
    assert await pool.fetchval("SELECT count FROM rate_limit_buckets") == 0
