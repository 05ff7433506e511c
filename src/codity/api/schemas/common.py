"""Building blocks every resource schema shares: strict request models, safe text, pages."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

#: Page size bounds for every keyset-paginated list.
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200

#: PostgreSQL text cannot hold NUL, and a lone surrogate cannot be encoded as UTF-8: both would
#: fail deep in the driver (a 500). Refusing them at the edge turns them into a 422 instead.
NO_NUL_PATTERN = r"^[^\x00]*$"


def _encodable(value: str) -> str:
    if "\x00" in value:
        raise ValueError("text must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode (no lone surrogates)") from None
    return value


def _check_json(value: Any, depth: int = 0) -> None:
    if depth > 64:
        raise ValueError("JSON is nested too deeply (more than 64 levels)")
    if isinstance(value, str):
        _encodable(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _encodable(str(key))
            _check_json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_json(item, depth + 1)


def _storable_json(value: Any) -> Any:
    _check_json(value)
    return value


#: A string PostgreSQL can store: no NUL, no lone surrogates.
SafeText = Annotated[str, AfterValidator(_encodable)]
#: Any JSON value PostgreSQL's jsonb can store (jsonb refuses \u0000 inside strings).
JsonValue = Annotated[Any, AfterValidator(_storable_json)]


def text_field(*, min_length: int = 0, max_length: int, **kwargs: Any) -> Any:
    """A `Field` for free text with bounds and the no-NUL pattern documented in OpenAPI."""
    return Field(min_length=min_length, max_length=max_length, pattern=NO_NUL_PATTERN, **kwargs)


class RequestModel(BaseModel):
    """Base of every request body: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class PublicModel(BaseModel):
    """Base of every response body."""

    model_config = ConfigDict(from_attributes=True)


def page_limit_description() -> str:
    return f"page size, 1..{MAX_PAGE_SIZE} (default {DEFAULT_PAGE_SIZE})"
