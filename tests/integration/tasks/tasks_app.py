"""An application's tasks, as a user writes them (imported by the tests beside it)."""

from __future__ import annotations

import uuid
from datetime import datetime

import pydantic

import codity

app = codity.App(project="acme/shop")
seen: list[tuple[str, object]] = []


class Address(pydantic.BaseModel):
    street: str
    city: str


@app.task(queue="emails", max_attempts=4, timeout_s=30, priority=5)
async def send_welcome(
    user_id: int, when: datetime, address: Address | None = None
) -> dict[str, str]:
    seen.append(("send_welcome", (user_id, when, address)))
    return {"user": str(user_id), "when_type": type(when).__name__}


@app.task(queue="emails")
def count_words(ctx: codity.JobContext, text: str, ref: uuid.UUID) -> int:
    """A sync task that asks for the context: it runs in the worker's thread pool."""
    ctx.logger.info("counting", chars=len(text))
    ctx.progress_sync(100, "counted")
    seen.append(("count_words", (ctx.attempt, ctx.deadline is not None, ref)))
    return len(text.split())


@app.task(queue="reports", name="reports.build")
async def build_report(ctx: codity.JobContext, days: int = 7) -> int:
    await ctx.progress(50, "half")
    seen.append(("build_report", (days, ctx.attempt)))
    return days


@app.task(queue="emails", unique_for_s=600)
async def remind(user_id: int) -> None:
    """Unique by default (the decorator's unique_for_s): one reminder per user at a time."""
