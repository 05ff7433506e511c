"""The shop's background work, as codity tasks.

`codity worker --app shop.tasks:app` (run from `examples/`) runs them. The worker gives each
task validated, typed arguments; a task that wants the job's context (attempt, logger,
progress, deadline, the worker's database pool) takes it as its first parameter.
"""

from __future__ import annotations

import codity

#: DATABASE_URL from the environment (or .env); queues are looked up in this project.
app = codity.App(project="shop/web")


@app.task(queue="emails", max_attempts=5, timeout_s=30)
async def send_order_confirmation(
    ctx: codity.JobContext, order_id: int, email: str
) -> dict[str, int]:
    """Pretend to send the e-mail: record it in `shop_emails`, once per order even when the
    job runs twice (delivery is at-least-once, so the write is idempotent)."""
    ctx.logger.info("sending order confirmation", order_id=order_id, attempt=ctx.attempt)
    await ctx.db.execute(
        "INSERT INTO shop_emails (order_id, recipient) VALUES ($1, $2) "
        "ON CONFLICT (order_id) DO NOTHING",
        order_id,
        email,
    )
    await ctx.progress(100, "sent")
    return {"order_id": order_id}
