"""Low — SSRF hardening of `http_request`.

Ports 80/443 plus HTTP_HANDLER_ALLOWED_PORTS only; 168.63.129.16 (Azure's platform address),
64:ff9b::/96 and 64:ff9b:1::/48 (NAT64) refused; the allowlist per project, within the
deployment's; no userinfo or query string in the URLs kept in errors and results. The full
SSRF suites are tests/unit/worker/test_worker_ssrf.py and
tests/integration/worker/test_worker_http_request.py (the per-project allowlist and the URL
scrubbing, each with its break-it note); these are the finding's checks in one place.
"""

from __future__ import annotations

from ipaddress import ip_address

import httpx
import pytest

from codity.worker.handlers.ssrf import DestinationRefusedError, SsrfGuard, blocked_reason, shown


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("168.63.129.16", "Azure"),
        ("64:ff9b::a9fe:a9fe", "NAT64"),  # 169.254.169.254 through a NAT64 gateway
        ("64:ff9b:1::a00:1", "NAT64 (local use)"),
    ],
)
def test_the_platform_and_nat64_addresses_are_refused(address: str, reason: str) -> None:
    """Break it: remove these networks from BLOCKED_NETWORKS (64:ff9b:1::/48 is globally
    routable to Python's ipaddress, so nothing else would catch it)."""
    found = blocked_reason(ip_address(address))
    assert found is not None
    assert reason in found


async def test_only_the_usual_ports() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    guard = SsrfGuard(resolver=resolver)
    await guard.check("https://example.com/")
    with pytest.raises(DestinationRefusedError, match="port 25 is not allowed"):
        await guard.check("http://example.com:25/")
    await SsrfGuard(resolver=resolver, allowed_ports=[25]).check("http://example.com:25/")


def test_urls_lose_their_credentials_and_query_strings() -> None:
    url = httpx.URL("https://bob:hunter2@api.example.com:8443/v1/hook?token=abc#frag")
    assert shown(url) == "https://api.example.com:8443/v1/hook"
