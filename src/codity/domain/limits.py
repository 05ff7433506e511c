"""Size limits shared by the database schema, the engine and the API."""

from __future__ import annotations

from typing import Final

#: The payload cap. The database enforces it with a CHECK (the backstop no code path can
#: bypass); the engine checks it first so the caller gets a clear error instead.
MAX_PAYLOAD_BYTES: Final = 65_536
