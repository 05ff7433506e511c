"""Values of secret-looking keys in tenant JSON (job payloads and results, dead letters,
schedules, log fields), hidden from viewers.

A viewer may read everything in the organisation, but a payload often carries credentials for
the job (`{"headers": {"Authorization": "Bearer ..."}, "api_key": ...}`): the value under any
key that names a secret is replaced by MASK, at any depth; the structure and every other value
stay visible. Members and above see the values (they can enqueue such jobs anyway).
"""

from __future__ import annotations

import re
from typing import Any

MASK = "••••••"

#: Key names that hold secrets: matched anywhere in the key, case-insensitively
#: (`Authorization`, `x-api-key`, `db_password`, `refreshToken`, `client_secret`...).
SECRET_KEY = re.compile(
    r"authori[sz]ation|token|passw(or)?d|passphrase|secret|api[-_]?key|cookie|credential"
    r"|private[-_]?key|signature|session",
    re.IGNORECASE,
)


def is_secret_key(key: object) -> bool:
    return isinstance(key, str) and SECRET_KEY.search(key) is not None


def mask_secrets(value: Any) -> Any:
    """A copy of `value` with the value of every secret-looking key replaced by MASK."""
    if isinstance(value, dict):
        return {k: MASK if is_secret_key(k) else mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    return value


def names_a_secret(value: Any) -> bool:
    """Whether `value` has a secret-looking key at any depth (a payload search document that
    would let a viewer test guesses of a value they are shown masked)."""
    if isinstance(value, dict):
        return any(is_secret_key(k) or names_a_secret(v) for k, v in value.items())
    if isinstance(value, list):
        return any(names_a_secret(v) for v in value)
    return False
