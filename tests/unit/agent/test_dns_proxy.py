"""The agent's DNS proxy on real loopback sockets, queried with dnspython's own client:
mesh names answered from the name table (full, `name.ns`, `name.ns.svc`, and `name` in the
proxy's namespace), the rest forwarded upstream over the transport it came on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import dns.asyncquery
import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from meshpilot.agent.dns_proxy import DnsOptions, DnsProxy
from meshpilot.model.name_table import NameInfo
from meshpilot.runtime.ports import free_ports

T = TypeVar("T")

TABLE = {
    "reviews.default.svc.cluster.local": NameInfo(
        ("10.96.0.5", "fd00::5"), "Kubernetes", "reviews", "default"
    ),
    "ratings.other.svc.cluster.local": NameInfo(("10.96.0.6",), "Kubernetes", "ratings", "other"),
    "api.example.test": NameInfo(("240.240.12.34", "2001:2::f0f0:c22"), "External"),
}
UPSTREAM_TABLE = {"www.upstream.test": NameInfo(("192.0.2.7",))}


def run(scenario: Callable[[int], Awaitable[T]], upstream: bool = False) -> T:
    """`scenario(port)` against a proxy in namespace default (and, with `upstream`, a second
    proxy as its upstream resolver, answering www.upstream.test)."""
    port, up_port = free_ports(2)

    async def main() -> T:
        upstream_proxy = DnsProxy(DnsOptions(namespace="x", port=up_port))
        upstream_proxy.update(UPSTREAM_TABLE)
        proxy = DnsProxy(
            DnsOptions(
                namespace="default",
                port=port,
                upstreams=("127.0.0.1",) if upstream else (),
                upstream_port=up_port,
                timeout=1.0,
            )
        )
        proxy.update(TABLE)
        await upstream_proxy.start()
        await proxy.start()
        try:
            return await scenario(port)
        finally:
            await proxy.close()
            await upstream_proxy.close()

    return asyncio.run(main())


async def ask(port: int, name: str, rdtype: str = "A", tcp: bool = False) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    send = dns.asyncquery.tcp if tcp else dns.asyncquery.udp
    return await send(query, "127.0.0.1", port=port, timeout=3)


def addresses(response: dns.message.Message) -> list[str]:
    return sorted(r.to_text() for rrset in response.answer for r in rrset)


@pytest.mark.parametrize(
    "name",
    [
        "reviews.default.svc.cluster.local.",
        "reviews.default.svc.",
        "reviews.default.",
        "reviews.",
        "REVIEWS.Default.",
    ],
)
def test_kubernetes_service_names_in_the_proxys_namespace(name: str) -> None:
    response = run(lambda port: ask(port, name))
    assert response.rcode() == dns.rcode.NOERROR
    assert addresses(response) == ["10.96.0.5"]
    assert response.answer[0].ttl == 30


def test_aaaa_and_tcp() -> None:
    response = run(lambda port: ask(port, "reviews.default.", "AAAA", tcp=True))
    assert addresses(response) == ["fd00::5"]


def test_service_entry_host_and_its_allocated_vip() -> None:
    assert addresses(run(lambda port: ask(port, "api.example.test."))) == ["240.240.12.34"]
    v6 = run(lambda port: ask(port, "api.example.test.", "AAAA"))
    assert addresses(v6) == ["2001:2::f0f0:c22"]


def test_short_name_of_another_namespace_is_not_ours() -> None:
    """`ratings` alone means ratings in the proxy's namespace: forwarded (no upstream here:
    SERVFAIL); `ratings.other` is answered."""
    assert run(lambda port: ask(port, "ratings.")).rcode() == dns.rcode.SERVFAIL
    assert addresses(run(lambda port: ask(port, "ratings.other."))) == ["10.96.0.6"]


def test_a_known_name_without_addresses_of_that_type_has_no_data() -> None:
    response = run(lambda port: ask(port, "ratings.other.", "AAAA"))
    assert response.rcode() == dns.rcode.NOERROR and response.answer == []
    mx = run(lambda port: ask(port, "reviews.", "MX"))
    assert mx.rcode() == dns.rcode.NOERROR and mx.answer == []


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_other_names_are_forwarded_upstream(tcp: bool) -> None:
    response = run(lambda port: ask(port, "www.upstream.test.", tcp=tcp), upstream=True)
    assert addresses(response) == ["192.0.2.7"]


def test_upstream_answers_are_passed_through_as_they_are() -> None:
    """The upstream's SERVFAIL for a name it does not know either reaches the client."""
    response = run(lambda port: ask(port, "nowhere.test."), upstream=True)
    assert response.rcode() == dns.rcode.SERVFAIL


def test_garbage_is_ignored_and_the_proxy_keeps_answering() -> None:
    async def scenario(port: int) -> dns.message.Message:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\x00\x03abc")
        writer.close()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            asyncio.DatagramProtocol, remote_addr=("127.0.0.1", port)
        )
        transport.sendto(b"\xff")
        transport.close()
        return await ask(port, "reviews.")

    assert addresses(run(scenario)) == ["10.96.0.5"]
