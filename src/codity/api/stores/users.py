"""People who sign in, and the verification of their email address.
SQL: `db/sql/api_users.sql`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import asyncpg

from codity.api.schemas.auth import UserPublic
from codity.core import Conn
from codity.db.queries import bind
from codity.domain.errors import EmailTakenError


@dataclass(frozen=True)
class Account:
    id: UUID
    email: str
    name: str | None
    password_hash: str
    is_active: bool
    email_verified_at: datetime | None

    @property
    def public(self) -> UserPublic:
        return UserPublic(
            id=self.id,
            email=self.email,
            name=self.name,
            email_verified=self.email_verified_at is not None,
        )


def _account(row: asyncpg.Record | None) -> Account | None:
    if row is None:
        return None
    return Account(
        id=row["id"],
        email=row["email"],
        name=row["display_name"],
        password_hash=row["password_hash"],
        is_active=row["is_active"],
        email_verified_at=row["email_verified_at"],
    )


async def create_user(
    conn: Conn, *, email: str, password_hash: str, display_name: str | None
) -> UserPublic:
    """A new, unverified account. EmailTakenError when the address already has one."""
    try:
        row = await bind(
            "api_users_insert", email=email, password_hash=password_hash, display_name=display_name
        ).fetchrow(conn)
    except asyncpg.UniqueViolationError:
        raise EmailTakenError("an account with this email already exists") from None
    return UserPublic(
        id=row["id"],
        email=row["email"],
        name=row["display_name"],
        email_verified=row["email_verified_at"] is not None,
    )


async def by_email(conn: Conn, email: str) -> Account | None:
    return _account(await bind("api_users_by_email", email=email).fetchrow(conn))


async def get_account(conn: Conn, user_id: UUID) -> Account | None:
    return _account(await bind("api_users_get", user_id=user_id).fetchrow(conn))


async def get_user(conn: Conn, user_id: UUID) -> UserPublic:
    account = await get_account(conn, user_id)
    assert account is not None  # the caller's own, authenticated account
    return account.public


async def touch_login(conn: Conn, user_id: UUID) -> None:
    await bind("api_users_touch_login", user_id=user_id).execute(conn)


async def set_password(
    conn: Conn, user_id: UUID, password_hash: str, valid_after: datetime
) -> None:
    """A new password; access tokens issued before `valid_after` stop working."""
    await bind(
        "api_users_set_password",
        user_id=user_id,
        password_hash=password_hash,
        valid_after=valid_after,
    ).execute(conn)


async def end_sessions(conn: Conn, user_id: UUID, valid_after: datetime) -> None:
    """Access tokens issued before `valid_after` stop working (refresh families:
    `sessions.revoke_all`)."""
    await bind("api_users_end_sessions", user_id=user_id, valid_after=valid_after).execute(conn)


async def new_verification(
    conn: Conn, *, verification_id: UUID, user_id: UUID, email: str, ttl_s: int
) -> None:
    await bind(
        "api_email_verifications_insert",
        id=verification_id,
        user_id=user_id,
        email=email,
        ttl_s=ttl_s,
    ).execute(conn)


async def use_verification(conn: Conn, *, verification_id: UUID, user_id: UUID, email: str) -> bool:
    """True when this link was unused, unexpired and for the account's current email: the
    account is verified now. False otherwise (nothing changes)."""
    verified = await bind(
        "api_email_verifications_use", id=verification_id, user_id=user_id, email=email
    ).fetchval(conn)
    return verified is not None
