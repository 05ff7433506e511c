"""The SSRF guard for `http_request`: where may a job make the worker connect?

A job's payload is written by a tenant; the worker sits inside our network. So before any
connection: resolve the host, check *every* address it resolves to, and refuse if any one is
internal (a name with one public and one private address must not win half the time). The
connection then goes to the address that was checked, never to a second resolution of the name
(DNS rebinding), and every redirect is checked again by the caller.

Only ports 80 and 443 are allowed, plus HTTP_HANDLER_ALLOWED_PORTS: a public host's SMTP,
Redis or admin port is not what an HTTP job is for.

A host on the allowlist skips the address check (a deliberate internal target). The allowlist
is per project (`projects.http_allowlist`) and bounded by the deployment's
HTTP_HANDLER_ALLOWLIST: a project reaches an internal host only when both name it, so an
organisation's admin (anyone can create an organisation) cannot open the metadata service to
their jobs.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

import httpx

IPAddress = IPv4Address | IPv6Address
#: (host, port) -> the addresses it resolves to, as strings. Injected in tests.
Resolver = Callable[[str, int], Awaitable[list[str]]]

CLOUD_METADATA = ip_address("169.254.169.254")

#: Checked in order; the first match names the reason. Anything else that Python does not
#: consider globally routable is refused too (the catch-all after this table).
BLOCKED_NETWORKS: tuple[tuple[IPv4Network | IPv6Network, str], ...] = tuple(
    (ip_network(net), reason)
    for net, reason in (
        ("169.254.169.254/32", "cloud metadata"),
        ("168.63.129.16/32", "Azure platform (WireServer, metadata)"),
        ("0.0.0.0/8", "unspecified ('this network')"),
        ("127.0.0.0/8", "loopback"),
        ("10.0.0.0/8", "private"),
        ("172.16.0.0/12", "private"),
        ("192.168.0.0/16", "private"),
        ("100.64.0.0/10", "CGNAT (shared address space)"),
        ("169.254.0.0/16", "link-local"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible (deprecated)"),
        ("64:ff9b::/96", "NAT64"),
        ("64:ff9b:1::/48", "NAT64 (local use)"),
        ("100::/64", "discard-only"),
        ("2001::/32", "Teredo"),
        ("2001:db8::/32", "documentation"),
        ("2002::/16", "6to4"),
        ("fc00::/7", "unique local (ULA)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated)"),
        ("ff00::/8", "multicast"),
    )
)


class DestinationRefusedError(Exception):
    """The URL's destination is not allowed; nothing was sent."""


def blocked_reason(address: IPAddress) -> str | None:
    """Why connecting to `address` is refused, or None when it is a public address."""
    if isinstance(address, IPv6Address):
        if address.ipv4_mapped is not None:  # ::ffff:a.b.c.d is a.b.c.d on a dual-stack socket
            inner = blocked_reason(address.ipv4_mapped)
            return f"IPv4-mapped {inner}" if inner else None
        if address.scope_id:  # fe80::1%eth0: the zone does not change what the address is
            address = IPv6Address(str(address).split("%", 1)[0])
    for network, reason in BLOCKED_NETWORKS:
        if address.version == network.version and address in network:
            return reason
    if not address.is_global:
        return "not globally routable"
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class Destination:
    """A checked URL and the address the connection must go to."""

    url: httpx.URL
    host: str
    port: int
    address: IPAddress

    def pinned_url(self) -> httpx.URL:
        """The URL with its host replaced by the checked address (no second DNS lookup)."""
        return self.url.copy_with(host=str(self.address))

    @property
    def host_header(self) -> str:
        return self.url.netloc.decode("ascii")

    @property
    def is_ip_literal(self) -> bool:
        try:
            ip_address(self.host)
        except ValueError:
            return False
        return True


#: Ports an http_request may use unless the deployment allows more (HTTP_HANDLER_ALLOWED_PORTS).
DEFAULT_PORTS = frozenset({80, 443})


class SsrfGuard:
    def __init__(
        self,
        allowlist: Iterable[str] = (),
        resolver: Resolver | None = None,
        *,
        allowed_ports: Iterable[int] = (),
    ) -> None:
        self._allowlist = frozenset(h.strip().lower().strip("[]") for h in allowlist if h.strip())
        self._resolve = resolver or system_resolver
        self._ports = DEFAULT_PORTS | frozenset(allowed_ports)

    def is_allowlisted(self, host: str) -> bool:
        return host.lower() in self._allowlist

    async def check(self, url: str | httpx.URL) -> Destination:
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise DestinationRefusedError(f"invalid URL: {exc}") from exc
        if parsed.scheme not in ("http", "https"):
            raise DestinationRefusedError(
                f"only http and https URLs are allowed, not {parsed.scheme or 'none'!r}"
            )
        host = parsed.host.lower()
        if not host:
            raise DestinationRefusedError("the URL has no host")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        if port not in self._ports:
            raise DestinationRefusedError(
                f"refused: port {port} is not allowed (80, 443 and HTTP_HANDLER_ALLOWED_PORTS: "
                f"{', '.join(map(str, sorted(self._ports)))})"
            )
        addresses = await self._addresses(host, port)
        if not self.is_allowlisted(host):
            for address in addresses:
                reason = blocked_reason(address)
                if reason:
                    where = host if str(address) == host else f"{host} resolves to {address}, which"
                    raise DestinationRefusedError(
                        f"refused: {where} is a {reason} address (to allow it, the project's "
                        "http_allowlist and HTTP_HANDLER_ALLOWLIST must both name the host)"
                    )
        return Destination(url=parsed, host=host, port=port, address=addresses[0])

    async def _addresses(self, host: str, port: int) -> list[IPAddress]:
        try:
            return [ip_address(host.replace("%25", "%"))]  # an IPv6 zone arrives URL-encoded
        except ValueError:
            pass
        try:
            resolved = await self._resolve(host, port)
        except OSError as exc:
            raise DestinationRefusedError(f"cannot resolve {host!r}: {exc}") from exc
        addresses: list[IPAddress] = []
        for text in resolved:
            try:
                addresses.append(ip_address(text))
            except ValueError:
                raise DestinationRefusedError(
                    f"{host!r} resolved to something that is not an IP address"
                ) from None
        if not addresses:
            raise DestinationRefusedError(f"{host!r} did not resolve to any address")
        return addresses


def shown(url: httpx.URL) -> str:
    """A URL as errors and results keep it: no userinfo (credentials), no query string (tokens
    travel there) and no fragment. Job errors and results are stored and shown to viewers."""
    return str(httpx.URL(scheme=url.scheme, host=url.host, port=url.port, path=url.path))
