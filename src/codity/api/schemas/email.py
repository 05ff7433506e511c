"""Email addresses as the API accepts them.

pydantic's `EmailStr` refuses the special-use domain `.test` (RFC 6761), which the demo and
local installations use on purpose: the demo operator is `operator@codity.test`. Codity never
delivers mail to these addresses (they are sign-in names), so syntax is what matters: this type
checks it with the same library, allowing `.test` and skipping deliverability, and documents
itself exactly like `EmailStr` in OpenAPI.
"""

from __future__ import annotations

from typing import Annotated

import email_validator
from pydantic import AfterValidator, WithJsonSchema


def _valid_email(value: str) -> str:
    try:
        info = email_validator.validate_email(
            value, check_deliverability=False, test_environment=True
        )
    except email_validator.EmailNotValidError as exc:
        raise ValueError(f"value is not a valid email address: {exc}") from None
    return info.normalized


Email = Annotated[
    str, AfterValidator(_valid_email), WithJsonSchema({"type": "string", "format": "email"})
]
