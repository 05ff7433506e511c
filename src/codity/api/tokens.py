"""Secret material: access JWTs, opaque refresh tokens, API keys.

- Access token: a JWT (HS256, `JWT_SECRET`), short-lived (ACCESS_TOKEN_TTL_S, 15 min), claims
  `sub` (user id), `org` (the active organisation), `role`, `type="access"`, `iat`, `exp`, `jti`.
- Refresh token: 32 random bytes, base64url, opaque; only its SHA-256 is stored. It is rotated on
  every use and belongs to a family (see `resources/auth.py`).
- API key: `cdy_` + 32 random bytes base64url; only its SHA-256 is stored, shown once.

Opaque tokens are hashed with plain SHA-256 (not argon2): they carry 256 bits of entropy, so a
slow hash adds nothing, and a fast hash lets us look a token up by its hash with an index.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt

from codity.domain.errors import UnauthorizedError
from codity.domain.states import MemberRole
from codity.settings import Settings

JWT_ALGORITHM = "HS256"
API_KEY_PREFIX = "cdy_"
#: How many characters of a key are kept in clear to tell keys apart in a list.
API_KEY_DISPLAY_CHARS = 12
_TOKEN_BYTES = 32


@dataclass(frozen=True)
class AccessClaims:
    user_id: uuid.UUID
    org_id: uuid.UUID
    role: MemberRole
    jti: str
    expires_at: int


def issue_access_token(
    settings: Settings, *, user_id: uuid.UUID, org_id: uuid.UUID, role: MemberRole
) -> str:
    now = int(time.time())
    claims: dict[str, Any] = {
        "sub": str(user_id),
        "org": str(org_id),
        "role": role.value,
        "type": "access",
        "iat": now,
        "exp": now + settings.access_token_ttl_s,
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, settings.jwt_secret, algorithm=JWT_ALGORITHM)


def decode_access_token(settings: Settings, token: str) -> AccessClaims:
    """The claims of a valid access token; `UnauthorizedError` for anything else.

    The algorithm is pinned (no `alg: none`, no key confusion) and every claim is required.
    """
    try:
        claims = jwt.decode(
            token,
            settings.jwt_secret,
            algorithms=[JWT_ALGORITHM],
            options={"require": ["sub", "org", "role", "type", "iat", "exp", "jti"]},
        )
    except jwt.ExpiredSignatureError:
        raise UnauthorizedError("the access token has expired: refresh it") from None
    except jwt.PyJWTError:
        raise UnauthorizedError("the access token is not valid") from None
    try:
        if claims["type"] != "access":
            raise ValueError("not an access token")
        return AccessClaims(
            user_id=uuid.UUID(str(claims["sub"])),
            org_id=uuid.UUID(str(claims["org"])),
            role=MemberRole(claims["role"]),
            jti=str(claims["jti"]),
            expires_at=int(claims["exp"]),
        )
    except (ValueError, TypeError):
        raise UnauthorizedError("the access token is not valid") from None


def sha256(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def new_refresh_token() -> tuple[str, bytes]:
    """(the token to hand out once, the hash to store)."""
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    return token, sha256(token)


def new_api_key() -> tuple[str, str, bytes]:
    """(the key to show once, its display prefix, the hash to store)."""
    key = API_KEY_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)
    return key, key[:API_KEY_DISPLAY_CHARS], sha256(key)


def looks_like_api_key(token: str) -> bool:
    return token.startswith(API_KEY_PREFIX)
