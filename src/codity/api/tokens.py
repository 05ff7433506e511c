"""Secret material: access JWTs, opaque refresh tokens, API keys.

- Access token: a JWT (HS256, `JWT_SECRET`), short-lived (ACCESS_TOKEN_TTL_S, 15 min), claims
  `sub` (user id), `org` (the active organisation), `role`, `type="access"`, `iat`, `exp`, `jti`.
- Refresh token: 32 random bytes, base64url, opaque, carried in an httpOnly cookie; only its
  HMAC-SHA256 under JWT_REFRESH_SECRET is stored, so rows written into the database by someone
  without the secret are no session. Rotated on every use, grouped in families (`resources/auth.py`).
- CSRF token: HMAC of the refresh family under JWT_REFRESH_SECRET, in a cookie the dashboard
  can read and must echo in `X-CSRF-Token` when it uses the refresh cookie.
- Email verification token: a JWT (HS256, `JWT_SECRET`, `type="email_verification"`) naming its
  row in `email_verifications` (`jti`), which makes it single-use.
- API key: `cdy_` + 32 random bytes base64url; only its SHA-256 is stored, shown once.
- Invitation token: 32 random bytes, base64url; only its SHA-256 is stored, mailed once.

Opaque tokens are hashed with plain SHA-256 (not argon2): they carry 256 bits of entropy, so a
slow hash adds nothing, and a fast hash lets us look a token up by its hash with an index.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt

from codity.domain.errors import InvalidVerificationTokenError, UnauthorizedError
from codity.domain.states import MemberRole
from codity.settings import Settings

JWT_ALGORITHM = "HS256"
API_KEY_PREFIX = "cdy_"
#: How many characters of a key are kept in clear to tell keys apart in a list.
API_KEY_DISPLAY_CHARS = 12
_TOKEN_BYTES = 32


EMAIL_VERIFICATION = "email_verification"


@dataclass(frozen=True)
class AccessClaims:
    user_id: uuid.UUID
    org_id: uuid.UUID
    role: MemberRole
    jti: str
    expires_at: int
    issued_at_ms: int


@dataclass(frozen=True)
class VerificationClaims:
    verification_id: uuid.UUID
    user_id: uuid.UUID
    email: str


def issue_access_token(
    settings: Settings,
    *,
    user_id: uuid.UUID,
    org_id: uuid.UUID,
    role: MemberRole,
    issued_at_ms: int | None = None,
) -> str:
    """`issued_at_ms` (Unix milliseconds, default now): `iat` is whole seconds, so the token
    also carries `iat_ms`, which `users.sessions_valid_after` is compared with: a token issued
    a moment before "sign out everywhere" must not survive the rest of that second."""
    now_ms = time.time_ns() // 1_000_000 if issued_at_ms is None else issued_at_ms
    now = now_ms // 1000
    claims: dict[str, Any] = {
        "sub": str(user_id),
        "org": str(org_id),
        "role": role.value,
        "type": "access",
        "iat": now,
        "iat_ms": now_ms,
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
            issued_at_ms=int(claims.get("iat_ms", int(claims["iat"]) * 1000)),
        )
    except (ValueError, TypeError):
        raise UnauthorizedError("the access token is not valid") from None


def issue_verification_token(
    settings: Settings, *, verification_id: uuid.UUID, user_id: uuid.UUID, email: str
) -> str:
    """The signed link token for one `email_verifications` row."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "sub": str(user_id),
        "email": email,
        "type": EMAIL_VERIFICATION,
        "iat": now,
        "exp": now + settings.email_verification_ttl_s,
        "jti": str(verification_id),
    }
    return jwt.encode(claims, settings.jwt_secret, algorithm=JWT_ALGORITHM)


def decode_verification_token(settings: Settings, token: str) -> VerificationClaims:
    """The claims of a verification link that is signed by us and not expired (single use is
    the database's part)."""
    try:
        claims = jwt.decode(
            token,
            settings.jwt_secret,
            algorithms=[JWT_ALGORITHM],
            options={"require": ["sub", "email", "type", "iat", "exp", "jti"]},
        )
        if claims["type"] != EMAIL_VERIFICATION:
            raise ValueError("not a verification token")
        return VerificationClaims(
            verification_id=uuid.UUID(str(claims["jti"])),
            user_id=uuid.UUID(str(claims["sub"])),
            email=str(claims["email"]),
        )
    except jwt.ExpiredSignatureError:
        raise InvalidVerificationTokenError(
            "this verification link has expired: ask for a new one"
        ) from None
    except (jwt.PyJWTError, ValueError, TypeError):
        raise InvalidVerificationTokenError("this verification link is not valid") from None


def sha256(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def refresh_token_hash(settings: Settings, token: str) -> bytes:
    """What `refresh_tokens.token_hash` holds: HMAC-SHA256 under JWT_REFRESH_SECRET."""
    return hmac.new(settings.jwt_refresh_secret.encode(), token.encode(), hashlib.sha256).digest()


def csrf_token(settings: Settings, family_id: uuid.UUID) -> str:
    """The CSRF token of a refresh family: stable across rotations, unguessable without the
    secret, so a page on another site cannot produce the header the refresh call needs."""
    mac = hmac.new(
        settings.jwt_refresh_secret.encode(), b"csrf:" + family_id.bytes, hashlib.sha256
    ).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def csrf_matches(settings: Settings, family_id: uuid.UUID, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(csrf_token(settings, family_id), presented)


def new_opaque_token() -> tuple[str, bytes]:
    """(a 256-bit token to hand out once, its SHA-256 to store): invitations."""
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    return token, sha256(token)


def new_api_key() -> tuple[str, str, bytes]:
    """(the key to show once, its display prefix, the hash to store)."""
    key = API_KEY_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)
    return key, key[:API_KEY_DISPLAY_CHARS], sha256(key)


def looks_like_api_key(token: str) -> bool:
    return token.startswith(API_KEY_PREFIX)
