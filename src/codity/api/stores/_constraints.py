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
        message = CHECK_MESSAGES.get(exc.constraint_name or "")
        raise ValidationError(
            message or f"the {what} settings are not consistent",
            details={"constraint": exc.constraint_name},
        ) from None


#: What a CHECK that a request can break means, said the way the request model would say it.
CHECK_MESSAGES = {
    # A PATCH is checked on the merged row: the model sees only the fields sent.
    "ck_queues_rate_limit_per_key_needs_a_limit": "rate_limit_per_key needs a rate_limit",
}
