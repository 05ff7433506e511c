"""The SSRF guard refuses every internal address class, for IP literals and host names alike,
before any connection is made. Nothing here opens a socket: names go to an injected resolver."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from codity.worker.handlers.ssrf import DestinationRefusedError, SsrfGuard, blocked_reason

#: One address per blocked class, as it would appear in a URL, with the reason we expect.
BLOCKED_LITERALS = [
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("[::1]", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "cloud metadata"),
    ("169.254.1.1", "link-local"),
    ("100.64.0.1", "CGNAT"),
    ("224.0.0.1", "multicast"),
    ("0.0.0.0", "unspecified"),
    ("240.0.0.1", "reserved"),
    ("[fd00::1]", "unique local"),
    ("[fc00::1]", "unique local"),
    ("[fe80::1]", "link-local"),
    ("[ff02::1]", "multicast"),
    ("[::]", "unspecified"),
    ("[::ffff:127.0.0.1]", "IPv4-mapped loopback"),
    ("[::ffff:10.0.0.1]", "IPv4-mapped private"),
    ("[::ffff:169.254.169.254]", "IPv4-mapped cloud metadata"),
    ("168.63.129.16", "Azure platform"),
    ("[64:ff9b::a00:1]", "NAT64"),
    ("[64:ff9b:1::a00:1]", "NAT64 \\(local use\\)"),
]


class FakeResolver:
    """A DNS stand-in: host -> addresses; records what it was asked."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in self.table:
            raise OSError(f"Name or service not known: {host}")
        return self.table[host]


def never_resolve() -> FakeResolver:
    return FakeResolver({})


@pytest.mark.parametrize(("host", "reason"), BLOCKED_LITERALS)
async def test_ip_literals_of_every_blocked_class_are_refused(host: str, reason: str) -> None:
    resolver = never_resolve()
    with pytest.raises(DestinationRefusedError, match=reason):
        await SsrfGuard(resolver=resolver).check(f"http://{host}/path")
    assert resolver.asked == []  # a literal is checked as is, never looked up


@pytest.mark.parametrize(("host", "reason"), BLOCKED_LITERALS)
async def test_host_names_resolving_to_every_blocked_class_are_refused(
    host: str, reason: str
) -> None:
    address = host.strip("[]")
    resolver = FakeResolver({"innocent.example": [address]})
    with pytest.raises(DestinationRefusedError, match=f"innocent.example resolves to .*{reason}"):
        await SsrfGuard(resolver=resolver).check("https://innocent.example/")


async def test_every_address_is_checked_not_just_the_first() -> None:
    resolver = FakeResolver({"split.example": ["93.184.216.34", "10.1.2.3"]})
    with pytest.raises(DestinationRefusedError, match=r"10\.1\.2\.3"):
        await SsrfGuard(resolver=resolver).check("http://split.example/")


async def test_localhost_by_name_is_refused_with_the_system_resolver() -> None:
    with pytest.raises(DestinationRefusedError, match="loopback"):
        await SsrfGuard().check("http://localhost/")


async def test_a_public_address_is_allowed_and_pinned() -> None:
    resolver = FakeResolver({"public.example": ["93.184.216.34"]})
    guard = SsrfGuard(resolver=resolver, allowed_ports=[8443])
    dest = await guard.check("https://public.example:8443/a?b=1")
    assert dest.address == ip_address("93.184.216.34")
    assert str(dest.pinned_url()) == "https://93.184.216.34:8443/a?b=1"
    assert dest.host_header == "public.example:8443"


async def test_an_allowlisted_host_may_be_internal() -> None:
    resolver = FakeResolver({"internal.service": ["10.0.0.7"]})
    guard = SsrfGuard(
        allowlist=["internal.service", "127.0.0.1"], resolver=resolver, allowed_ports=[5000]
    )
    assert (await guard.check("http://internal.service/")).address == ip_address("10.0.0.7")
    assert (await guard.check("http://127.0.0.1:5000/")).address == ip_address("127.0.0.1")
    with pytest.raises(DestinationRefusedError):  # the allowlist names hosts, not whole classes
        await guard.check("http://127.0.0.2/")


@pytest.mark.parametrize(
    "url", ["ftp://example.com/", "file:///etc/passwd", "gopher://127.0.0.1/", "http:///nohost"]
)
async def test_only_http_urls_with_a_host(url: str) -> None:
    with pytest.raises(DestinationRefusedError):
        await SsrfGuard(resolver=never_resolve()).check(url)


async def test_unresolvable_names_are_refused() -> None:
    with pytest.raises(DestinationRefusedError, match="cannot resolve"):
        await SsrfGuard(resolver=never_resolve()).check("http://nowhere.invalid/")


def test_public_addresses_have_no_reason_to_be_blocked() -> None:
    for address in ("8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"):
        assert blocked_reason(ip_address(address)) is None


async def test_only_ports_80_and_443_unless_the_deployment_allows_more() -> None:
    """Low: a public host's SMTP, Redis or admin port is not an HTTP job's business. Break it:
    drop the port check in SsrfGuard.check."""
    resolver = FakeResolver({"public.example": ["93.184.216.34"]})
    plain = SsrfGuard(resolver=resolver)
    for url in ("http://public.example/", "https://public.example/", "http://public.example:443/"):
        await plain.check(url)
    for port in (22, 25, 6379, 8080, 9200):
        with pytest.raises(DestinationRefusedError, match=f"port {port} is not allowed"):
            await plain.check(f"http://public.example:{port}/")
    assert resolver.asked.count("public.example") == 3  # refused before any lookup
    extra = SsrfGuard(resolver=resolver, allowed_ports=[8080])
    await extra.check("http://public.example:8080/")


def test_the_allowed_ports_setting_is_checked_at_startup() -> None:
    from codity.settings import Settings

    assert Settings(_env_file=None, HTTP_HANDLER_ALLOWED_PORTS="8080, 8443").allowed_ports == {
        8080, 8443
    }  # fmt: skip
    with pytest.raises(ValueError, match="invalid ports: 99999"):
        Settings(_env_file=None, HTTP_HANDLER_ALLOWED_PORTS="8080,99999")
