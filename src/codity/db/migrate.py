"""Migrations as functions: upgrade, downgrade, and the question 'is this database at head?'."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codity.db.dsn import plain_dsn, sqlalchemy_url

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic (and with it SQLAlchemy and Mako) is imported inside the functions that use it: most
# processes that import this module (workers, the API's readiness check) only ever read the
# head revision's name, and importing alembic would add about a second to their start-up.

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def migration_module(file_name: str) -> Any:
    """A migration's module, loaded from its file in versions/ (their names start with a digit,
    so `import` cannot reach them): a later migration's downgrade restores what an earlier one
    wrote from the earlier one's own text."""
    import importlib.util

    path = MIGRATIONS_DIR / "versions" / file_name
    spec = importlib.util.spec_from_file_location(f"codity_migration_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def alembic_config(database_url: str) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    return cfg


def _in_thread(fn: object, *args: object) -> None:
    """Alembic's env.py calls asyncio.run(); keep it off any loop the caller is running."""
    import threading

    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn(*args)  # type: ignore[operator]
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if errors:
        raise errors[0]


def upgrade(database_url: str, revision: str = "head") -> None:
    from alembic import command

    _in_thread(command.upgrade, alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "base") -> None:
    from alembic import command

    _in_thread(command.downgrade, alembic_config(database_url), revision)


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config("postgresql://localhost/x"))
    head = script.get_current_head()
    assert head is not None
    return head


async def current_revision(database_url: str) -> str | None:
    import asyncpg

    conn = await asyncpg.connect(plain_dsn(database_url))
    try:
        exists = await conn.fetchval("SELECT to_regclass('public.alembic_version') IS NOT NULL")
        if not exists:
            return None
        rev: str | None = await conn.fetchval("SELECT version_num FROM alembic_version")
        return rev
    finally:
        await conn.close()


def is_at_head(database_url: str) -> bool:
    return asyncio.run(current_revision(database_url)) == head_revision()


__all__ = [
    "alembic_config",
    "current_revision",
    "downgrade",
    "head_revision",
    "is_at_head",
    "upgrade",
]
