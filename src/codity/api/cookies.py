"""The session cookies the dashboard holds.

- `codity_refresh`: the refresh token. httpOnly (no script, so no XSS, can read it),
  SameSite=Strict (no other site's page can make the browser send it), Path=/api/v1/auth (only
  the auth endpoints ever receive it), Secure over HTTPS and always in production.
- `codity_csrf`: the CSRF token of the session (an HMAC of the refresh family, not a secret to
  the page itself). Readable by the dashboard, which echoes it in `X-CSRF-Token`; a page on
  another origin cannot read it, so it cannot forge the header a cookie-carried call needs.

The access token is never in a cookie: the dashboard keeps it in memory and sends it as a
bearer token, so ordinary API calls have no CSRF surface at all.
"""

from __future__ import annotations

from fastapi import Request, Response

from codity.settings import Settings

REFRESH_COOKIE = "codity_refresh"
CSRF_COOKIE = "codity_csrf"
CSRF_HEADER = "X-CSRF-Token"
#: The only path the refresh cookie is ever sent to.
REFRESH_COOKIE_PATH = "/api/v1/auth"


def _secure(request: Request, settings: Settings) -> bool:
    return request.url.scheme == "https" or settings.environment == "production"


def set_session(
    response: Response, request: Request, settings: Settings, *, refresh: str, csrf: str
) -> None:
    secure = _secure(request, settings)
    response.set_cookie(
        REFRESH_COOKIE,
        refresh,
        max_age=settings.refresh_token_ttl_s,
        path=REFRESH_COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=secure,
    )
    response.set_cookie(
        CSRF_COOKIE,
        csrf,
        max_age=settings.refresh_token_ttl_s,
        path="/",
        httponly=False,
        samesite="strict",
        secure=secure,
    )


def clear_session(response: Response, request: Request, settings: Settings) -> None:
    secure = _secure(request, settings)
    response.delete_cookie(
        REFRESH_COOKIE, path=REFRESH_COOKIE_PATH, httponly=True, samesite="strict", secure=secure
    )
    response.delete_cookie(CSRF_COOKIE, path="/", samesite="strict", secure=secure)
