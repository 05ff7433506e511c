"""`codity up`: the stack in one command; a killed worker does not stop it; SIGTERM drains all."""

from __future__ import annotations

import os
import signal
import time
from email import message_from_bytes
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from tests.acceptance.services.service_procs import Procs, exit_code, wait_for, wait_workers
from tests.factories import make_queue, make_tenant

from codity import core

pytestmark = pytest.mark.slow


async def test_up_runs_the_stack_survives_a_dead_worker_and_drains_on_sigterm(
    procs: Procs, db: asyncpg.Connection[Any], tmp_path: Path
) -> None:
    tenant = await make_tenant(db)
    queue_id = await make_queue(db, tenant.project_id, name="emails")
    up = procs.spawn(
        "up", "--workers", "2", "--no-api", "--no-web", cwd=tmp_path, name="up", unset=("SMTP_URL",)
    )
    workers = await wait_workers(db, 2, timeout_s=60)

    # SMTP_URL unset: the local sink receives the mail and writes it to .codity/outbox/.
    mail = await core.enqueue(
        db, queue_id,
        core.NewJob(handler="email.send", payload={"to": "ops@example.test", "subject": "hi", "text": "from up"}),
    )  # fmt: skip

    async def delivered() -> list[Path]:
        return sorted((tmp_path / ".codity" / "outbox").glob("*.eml"))

    (eml,) = await wait_for(delivered, what="a message in the outbox")
    assert message_from_bytes(eml.read_bytes())["Subject"] == "hi"

    async def mail_completed() -> bool:
        return (
            await db.fetchval("SELECT status::text FROM jobs WHERE id = $1", mail.id) == "completed"
        )

    await wait_for(mail_completed, what="the email job recorded as completed")

    # A worker killed from outside is logged; the rest of the stack keeps going.
    victim_pid = workers[0]["pid"]
    os.kill(victim_pid, signal.SIGKILL)
    await db.execute("SELECT pg_sleep(1)")
    assert up.poll() is None
    job = await core.enqueue(db, queue_id, core.NewJob(handler="noop"))

    async def done() -> bool:
        return (
            await db.fetchval("SELECT status::text FROM jobs WHERE id = $1", job.id) == "completed"
        )

    await wait_for(done, what="the surviving worker")

    up.send_signal(signal.SIGTERM)
    started = time.monotonic()
    assert exit_code(up, 30) == 0, procs.logs(up)
    log = procs.logs(up)
    assert "child exited unexpectedly" in log
    assert "codity is down" in log
    survivor = await db.fetchval("SELECT status::text FROM workers WHERE pid <> $1", victim_pid)
    assert survivor == "stopped"
    print(f"up stopped {time.monotonic() - started:.2f} s after SIGTERM")
