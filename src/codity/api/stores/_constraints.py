"""Constraint violations a store expects, as the typed errors the envelope reports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from codity.domain.errors import NameTakenError, ValidationError


@asynccontextmanager
async def constraint_errors(what: str) -> AsyncIterator[None]:
    """A unique violation means the name is taken; a CHECK violation means a bad combination."""
    try:
        yield
    except asyncpg.UniqueViolationError:
        raise NameTakenError(f"a {what} with that name already exists") from None
    except asyncpg.CheckViolationError as exc:
        raise ValidationError(
            f"the {what} settings are not consistent", details={"constraint": exc.constraint_name}
        ) from None
