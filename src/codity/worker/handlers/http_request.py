"""`http_request`: make one HTTP request described by the payload, through the SSRF guard.

Payload: `{"url": ..., "method": "GET", "headers": {...}, "body": "text" | "json": {...},
"timeout": seconds}`. Success on 2xx; any other status fails the attempt (and is retried by
the job's policy). The result holds the status, the response headers and a bounded body.

Redirects are followed by hand (at most MAX_REDIRECTS), each hop re-checked by the guard, so a
public URL cannot bounce the worker to 169.254.169.254. Credentials are not carried to another
host. The response is streamed and reading stops at MAX_RESPONSE_BYTES.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from codity.core import tenants
from codity.settings import get_settings
from codity.worker.context import JobContext
from codity.worker.handlers.basic import HandlerInputError
from codity.worker.handlers.ssrf import DestinationRefusedError, SsrfGuard, shown
from codity.worker.registry import handler

MAX_REDIRECTS = 5
#: Reading stops here; a longer body is marked truncated.
MAX_RESPONSE_BYTES = 1_048_576
#: How much of the body the result keeps (results live in the jobs table).
MAX_BODY_IN_RESULT = 16_384
MAX_HEADERS_IN_RESULT = 50
DEFAULT_TIMEOUT_S = 30.0
MAX_TIMEOUT_S = 300.0
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Never forwarded to a different host on redirect.
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


class HttpStatusError(Exception):
    """The server answered with a status outside 2xx."""


@dataclass
class HttpRequestSpec:
    url: str
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_payload(cls, payload: Any) -> HttpRequestSpec:
        if not isinstance(payload, dict):
            raise HandlerInputError("payload must be a JSON object with at least a 'url'")
        url = payload.get("url")
        if not isinstance(url, str) or not url:
            raise HandlerInputError("payload.url must be a non-empty string")
        method = str(payload.get("method", "GET")).upper()
        if method not in METHODS:
            raise HandlerInputError(f"payload.method must be one of {', '.join(sorted(METHODS))}")
        headers = payload.get("headers") or {}
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise HandlerInputError("payload.headers must map strings to strings")
        headers = {k: v for k, v in headers.items() if k.lower() != "host"}
        content: bytes | None = None
        if "json" in payload:
            import json

            content = json.dumps(payload["json"]).encode()
            headers.setdefault("content-type", "application/json")
        elif payload.get("body") is not None:
            if not isinstance(payload["body"], str):
                raise HandlerInputError("payload.body must be a string (use 'json' for JSON)")
            content = payload["body"].encode()
        timeout = payload.get("timeout", DEFAULT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise HandlerInputError("payload.timeout must be a positive number of seconds")
        return cls(url, method, headers, content, min(float(timeout), MAX_TIMEOUT_S))


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


async def perform(spec: HttpRequestSpec, guard: SsrfGuard) -> dict[str, Any]:
    """Run the request; returns the result dict or raises (refused, timeout, non-2xx)."""
    method, url, content, headers = spec.method, httpx.URL(spec.url), spec.content, spec.headers
    timeout = httpx.Timeout(spec.timeout_s)
    # trust_env=False: a proxy from the environment would connect on our behalf, unchecked.
    async with httpx.AsyncClient(
        follow_redirects=False, trust_env=False, timeout=timeout
    ) as client:
        for hop in range(MAX_REDIRECTS + 1):
            dest = await guard.check(url)
            extensions = {} if dest.is_ip_literal else {"sni_hostname": dest.host}
            request = client.build_request(
                method,
                dest.pinned_url(),
                headers={**headers, "Host": dest.host_header},
                content=content,
                extensions=extensions,
            )
            try:
                response = await client.send(request, stream=True)
            except httpx.TimeoutException as exc:
                raise TimeoutError(
                    f"{method} {shown(dest.url)} timed out after {spec.timeout_s:g} s"
                ) from exc
            except httpx.HTTPError as exc:
                raise ConnectionError(f"{method} {shown(dest.url)} failed: {exc}") from exc
            try:
                if response.is_redirect:
                    next_url = dest.url.join(response.headers["location"])
                    if response.status_code == 303 or (
                        response.status_code in (301, 302) and method == "POST"
                    ):
                        method, content = "GET", None
                    if next_url.host != dest.url.host:
                        headers = {
                            k: v for k, v in headers.items() if k.lower() not in CREDENTIAL_HEADERS
                        }
                    url = next_url
                    continue
                body, truncated = await _read_capped(response, MAX_RESPONSE_BYTES)
            except httpx.TimeoutException as exc:
                raise TimeoutError(
                    f"{method} {shown(dest.url)} timed out after {spec.timeout_s:g} s"
                ) from exc
            finally:
                await response.aclose()
            text = body[:MAX_BODY_IN_RESULT].decode(response.encoding or "utf-8", errors="replace")
            result = {
                "status": response.status_code,
                "url": shown(dest.url),
                "redirects": hop,
                "headers": dict(list(response.headers.items())[:MAX_HEADERS_IN_RESULT]),
                "body": text,
                "body_bytes": len(body),
                "body_truncated": truncated or len(body) > MAX_BODY_IN_RESULT,
            }
            if not response.is_success:
                raise HttpStatusError(
                    f"{method} {shown(dest.url)} returned HTTP {response.status_code}: {text[:200]}"
                )
            return result
    raise DestinationRefusedError(f"more than {MAX_REDIRECTS} redirects")


@handler("http_request")
async def http_request(ctx: JobContext) -> dict[str, Any]:
    spec = HttpRequestSpec.from_payload(ctx.payload)
    left = ctx.time_left()
    if left is not None:
        spec.timeout_s = max(0.001, min(spec.timeout_s, left))
    settings = get_settings()
    tenant = await tenants.tenant_of_queue(ctx.db, ctx.queue_id) if ctx.db is not None else None
    # Per project, within the deployment's list: both must name a host for it to count.
    allowlist = settings.allowlist_hosts & (tenant.http_allowlist if tenant else frozenset())
    guard = SsrfGuard(allowlist, allowed_ports=settings.allowed_ports)
    ctx.logger.info("http request", method=spec.method, host=httpx.URL(spec.url).host)
    result = await perform(spec, guard)
    ctx.logger.info("http response", status=result["status"], redirects=result["redirects"])
    return result
