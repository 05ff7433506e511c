"""Connection strings: one DSN in the environment, the right spelling for each consumer."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def plain_dsn(url: str) -> str:
    """The libpq spelling asyncpg wants: `postgresql://...` (drops a `+driver` suffix)."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme == "postgres":
        scheme = "postgresql"
    return urlunsplit((scheme, parts.netloc, parts.path, parts.query, parts.fragment))


def sqlalchemy_url(url: str) -> str:
    """The SQLAlchemy spelling for the async asyncpg dialect."""
    return "postgresql+asyncpg" + plain_dsn(url)[len("postgresql") :]


def with_database(url: str, database: str) -> str:
    """The same server, another database."""
    parts = urlsplit(plain_dsn(url))
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


def redact(url: str) -> str:
    """The DSN with its password hidden, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":***@")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
