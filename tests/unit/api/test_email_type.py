"""Sign-in names: the demo's `.test` addresses are accepted, malformed addresses are not."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from codity.api.schemas.auth import LoginRequest, RegisterRequest
from codity.api.schemas.tenancy import InvitationCreate


@pytest.mark.parametrize(
    "email", ["operator@codity.test", "viewer@codity.test", "a.b+c@example.com"]
)
def test_demo_and_ordinary_addresses_are_accepted(email: str) -> None:
    assert LoginRequest(email=email, password="x").email == email


@pytest.mark.parametrize(
    "email", ["nope", "a@b", "x@@y.com", "a b@c.com", "x@localhost", "y@foo.local"]
)
def test_malformed_or_reserved_addresses_are_refused(email: str) -> None:
    with pytest.raises(ValidationError, match="not a valid email address"):
        LoginRequest(email=email, password="x")


def test_register_and_member_invites_use_the_same_rule() -> None:
    RegisterRequest(email="new@codity.test", password="x" * 12, name="N", org_name="O")
    InvitationCreate(email="new@codity.test", role="member")
    with pytest.raises(ValidationError):
        InvitationCreate(email="not-an-email", role="member")
