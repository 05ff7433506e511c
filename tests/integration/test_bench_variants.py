"""Every schema variant in bench/variants/ still applies to the schema as migrated.

The design decisions quote figures measured with these files (`bench/drain_variants.py --sql`,
`bench/server_instructions.py --sql`); a migration that renames or drops what a variant changes
would leave those commands failing on a scratch database long after the figure was written.
Each variant runs in a transaction that is rolled back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import pytest

VARIANTS_DIR = Path(__file__).resolve().parents[2] / "bench" / "variants"
VARIANTS = sorted(VARIANTS_DIR.glob("*.sql"))


def variant_sql(name: str) -> str:
    """The SQL of one variant: the twin a test compares the schema as migrated with."""
    return (VARIANTS_DIR / name).read_text()


def test_there_are_variants() -> None:
    assert len(VARIANTS) >= 5, VARIANTS


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.name)
async def test_the_variant_applies_to_the_migrated_schema(
    db: asyncpg.Connection[Any], variant: Path
) -> None:
    before = await _schema(db)
    tx = db.transaction()
    await tx.start()
    try:
        await db.execute(variant.read_text())
        # It changed something: an index, a trigger, a key, or a setting of one or of a table.
        assert await _schema(db) != before
    finally:
        await tx.rollback()


async def _schema(db: asyncpg.Connection[Any]) -> list[Any]:
    """The indexes and triggers of the engine's tables, with their definitions and options, the
    tables' own options, and every constraint on `jobs` or referencing it (a foreign key's own
    triggers are internal)."""
    return [
        tuple(r)
        for r in await db.fetch(
            """
            SELECT 'index', c.relname, pg_get_indexdef(c.oid), c.reloptions::text
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid IN ('jobs'::regclass, 'job_executions'::regclass)
            UNION ALL
            SELECT 'trigger', t.tgname, pg_get_triggerdef(t.oid), NULL
            FROM pg_trigger t
            WHERE t.tgrelid = 'jobs'::regclass AND NOT t.tgisinternal
            UNION ALL
            SELECT 'constraint', k.conname, pg_get_constraintdef(k.oid), NULL
            FROM pg_constraint k
            WHERE 'jobs'::regclass IN (k.conrelid, k.confrelid)
            UNION ALL
            SELECT 'table', c.relname, NULL, c.reloptions::text
            FROM pg_class c
            WHERE c.oid IN ('jobs'::regclass, 'job_executions'::regclass)
            ORDER BY 1, 2, 3
            """
        )
    ]
