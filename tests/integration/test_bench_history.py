"""`codity bench history`: a template of finished jobs, made by the engine, copied before every
timed drain. The copy is a file copy (`STRATEGY = FILE_COPY`): PostgreSQL 15's default, WAL_LOG,
writes the whole template through shared buffers and the WAL, and the drain that followed spent
part of its window writing that copy out."""

from __future__ import annotations

import uuid

import asyncpg

from codity.cli import benchmarks
from codity.db.dsn import plain_dsn, with_database

#: The template's size: large enough that a page-by-page copy's WAL is unmistakable.
TEMPLATE_MB = 16


async def test_a_copy_of_the_history_template_is_a_file_copy(pg_server_url: str) -> None:
    template = f"codity_copy_t_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(plain_dsn(pg_server_url))
    try:
        await admin.execute(f'CREATE DATABASE "{template}"')
        filler = await asyncpg.connect(plain_dsn(with_database(pg_server_url, template)))
        try:
            await filler.execute(
                "CREATE TABLE history AS SELECT g AS id, repeat('x', 1000) AS body "
                f"FROM generate_series(1, {TEMPLATE_MB * 1024}) g"
            )
        finally:
            await filler.close()
        wal_before = await admin.fetchval("SELECT pg_current_wal_insert_lsn()")
        async with benchmarks.copy_of(pg_server_url, template) as url:
            wal = await admin.fetchval(
                "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)", wal_before
            )
            copy = await asyncpg.connect(plain_dsn(url))
            try:
                assert await copy.fetchval("SELECT count(*) FROM history") == TEMPLATE_MB * 1024
            finally:
                await copy.close()
        # WAL_LOG would have written every page of the template into the WAL (16 MB and more).
        assert wal < 1024 * 1024, f"the copy wrote {wal:,} bytes of WAL"
        name = url.rsplit("/", 1)[-1].split("?", 1)[0]
        assert not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
        await admin.close()


async def test_the_history_template_holds_finished_jobs_each_with_its_execution(
    pg_server_url: str,
) -> None:
    finished = 2_500  # more than one round's claim batch, and a partial last batch
    async with benchmarks.history_template(pg_server_url, finished) as template:
        conn = await asyncpg.connect(plain_dsn(with_database(pg_server_url, template)))
        try:
            row = await conn.fetchrow(
                "SELECT count(*) AS jobs, count(*) FILTER (WHERE status = 'completed') AS done,"
                " count(DISTINCT queue_id) AS queues,"
                " (SELECT count(*) FROM job_executions e WHERE e.status = 'completed'"
                "   AND e.job_id = ANY(ARRAY(SELECT id FROM jobs))) AS executions,"
                " (SELECT name FROM queues) AS queue"
                " FROM jobs"
            )
        finally:
            await conn.close()
    assert dict(row) == {
        "jobs": finished,
        "done": finished,
        "queues": 1,
        "executions": finished,
        "queue": benchmarks.BENCH_QUEUE,
    }
