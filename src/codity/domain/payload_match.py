"""`payload.customer_id = 42`: the Jobs screen's payload filter, parsed into a JSON containment
document (`{"customer_id": 42}`) that `jobs.payload @> ...` answers from the GIN index.

The path is dot-separated object keys, optionally starting with `payload.`; the value is JSON
when it parses as JSON (42, true, "x", null), otherwise the text itself (a bare word).
"""

from __future__ import annotations

import json
import re
from typing import Any

from codity.domain.errors import ValidationError

_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,100}$")
MAX_DEPTH = 8


def parse_payload_match(expression: str) -> dict[str, Any]:
    if "=" not in expression:
        raise ValidationError(
            "payload filter must be `path = value`, e.g. `customer_id = 42` or "
            '`payload.order.id = "A-1"`'
        )
    path_text, value_text = (part.strip() for part in expression.split("=", 1))
    keys = path_text.split(".")
    if keys and keys[0] == "payload":
        keys = keys[1:]
    if not keys or len(keys) > MAX_DEPTH or not all(_KEY.match(k) for k in keys):
        raise ValidationError(
            "payload path must be dot-separated keys of letters, digits, '_' or '-' "
            f"(at most {MAX_DEPTH})"
        )
    if not value_text:
        raise ValidationError("payload filter needs a value after '='")
    try:
        value: Any = json.loads(value_text)
    except ValueError:
        value = value_text
    document: Any = value
    for key in reversed(keys):
        document = {key: document}
    result: dict[str, Any] = document
    return result
