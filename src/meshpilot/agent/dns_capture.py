"""The agent side of DNS capture: its DNS proxy running beside Envoy, name table kept fresh.

Istio's `ISTIO_META_DNS_CAPTURE=true` starts istio-agent's DNS proxy on 15053 (capture then
sends the pod's port-53 traffic there: `meshpilot iptables --redirect-dns`), and
`ISTIO_META_DNS_AUTO_ALLOCATE=true` has ServiceEntry hosts without addresses answered with
VIPs from 240.240.0.0/16. The upstream nameservers are resolv.conf's, read at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from meshpilot.agent.dns_proxy import DnsOptions, DnsProxy
from meshpilot.agent.name_table_client import NameTableClient
from meshpilot.agent.options import AgentOptions
from meshpilot.capture.flags import resolv_conf_servers, split
from meshpilot.capture.rules import DNS_PROXY_PORT

__all__ = ["DnsCapture", "running_dns_proxy"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DnsCapture:
    auto_allocate: bool = False  # ISTIO_META_DNS_AUTO_ALLOCATE
    resolv_conf: Path = Path("/etc/resolv.conf")
    port: int = DNS_PROXY_PORT
    refresh: float = 2.0  # seconds between name table fetches


@contextlib.asynccontextmanager
async def running_dns_proxy(
    options: AgentOptions, dns: DnsCapture, owner: tuple[int, int] | None
) -> AsyncIterator[DnsProxy]:
    """The DNS proxy listening on 127.0.0.1 (and ::1 for an IPv6 pod) until the block ends;
    its upstream sockets owned by `owner`, the proxy's UID/GID that capture lets out."""
    ipv6 = any(":" in ip for ip in options.ip_addresses)
    proxy = DnsProxy(
        DnsOptions(
            namespace=options.namespace,
            upstreams=tuple(split(resolv_conf_servers(dns.resolv_conf))),
            port=dns.port,
            hosts=("127.0.0.1", "::1") if ipv6 else ("127.0.0.1",),
            owner=owner,
        )
    )
    await proxy.start()
    keeper: asyncio.Task[None] | None = None
    if options.secure_xds:
        log.warning(
            "DNS proxy: the name table is fetched over plaintext xDS only (a unix: address "
            "or port 15010); answering every query from resolv.conf's nameservers"
        )
    else:
        proxy_id = f"{options.pod_name}.{options.namespace}"
        client = NameTableClient(
            options.discovery_address, proxy_id, auto_allocate=dns.auto_allocate
        )
        keeper = asyncio.create_task(client.keep(proxy.update, dns.refresh), name="name-table")
    try:
        yield proxy
    finally:
        if keeper is not None:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
        await proxy.close()
