"""Turn constraint violations into the typed errors the envelope reports (never a 500)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from codity.api.resource_errors import NameTakenError
from codity.domain.errors import ValidationError


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
