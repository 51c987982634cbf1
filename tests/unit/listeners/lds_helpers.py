"""Build a sidecar's listeners from YAML, and answer "which chain would Envoy pick?".

`select_chain` follows Envoy's filter chain match order (destination port, destination IP,
server name, transport protocol, application protocols; the most specific value wins at
each step, a chain without the criterion is the fallback) and ends at default_filter_chain.
`outbound_call` adds virtualOutbound's original-destination hand-off: the listener bound to
ip:port, then 0.0.0.0:port, then virtualOutbound itself.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2

from meshpilot.config.diagnostics import Severity
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.listeners import generate_sidecar_listeners
from meshpilot.xds.protos import Filters
from tests.conftest import proxy_for, push_from_text

Chain = lc_pb2.FilterChain


@dataclass
class Mesh:
    push: PushContext
    proxy: Proxy
    listeners: list[listener_pb2.Listener]

    def listener(self, name: str) -> listener_pb2.Listener:
        found = [lst for lst in self.listeners if lst.name == name]
        assert found, f"no listener {name}; have {[lst.name for lst in self.listeners]}"
        return found[0]

    @property
    def names(self) -> list[str]:
        return [lst.name for lst in self.listeners]


def build(text: str, pod: str, intercept: bool = True) -> Mesh:
    """Load YAML, pick the pod `name.namespace` as the sidecar, generate its listeners."""
    result, push = push_from_text(text)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert not errors, errors
    proxy = dataclasses.replace(proxy_for(push, pod), intercept=intercept)
    return Mesh(push, proxy, generate_sidecar_listeners(push, proxy, None))


def _narrow(chains: list[Chain], key: Callable[[Chain], int | None]) -> list[Chain]:
    """Keep the chains with the best (highest) score; None means "does not specify"."""
    scored = [(key(c), c) for c in chains]
    specified = [s for s, _ in scored if s is not None and s >= 0]
    if specified:
        best = max(specified)
        return [c for s, c in scored if s == best]
    return [c for s, c in scored if s is None]


def _ip_score(chain: Chain, ip: str | None) -> int | None:
    ranges = chain.filter_chain_match.prefix_ranges
    if not ranges:
        return None
    best = -1
    for r in ranges:
        net = ipaddress.ip_network(f"{r.address_prefix}/{r.prefix_len.value}", strict=False)
        if ip is not None and ipaddress.ip_address(ip) in net:
            best = max(best, r.prefix_len.value)
    return best


def _sni_score(chain: Chain, sni: str | None) -> int | None:
    names = chain.filter_chain_match.server_names
    if not names:
        return None
    best = -1
    for n in names:
        if sni is not None and n == sni:
            best = max(best, 1000)
        elif sni is not None and n.startswith("*") and sni.endswith(n[1:]):
            best = max(best, len(n))
    return best


def select_chain(
    listener: listener_pb2.Listener,
    port: int,
    ip: str | None = None,
    transport: str = "raw_buffer",
    alpn: Sequence[str] = (),
    sni: str | None = None,
) -> Chain | None:
    chains = list(listener.filter_chains)
    steps: list[Callable[[Chain], int | None]] = [
        lambda c: (
            (1 if c.filter_chain_match.destination_port.value == port else -1)
            if c.filter_chain_match.HasField("destination_port")
            else None
        ),
        lambda c: _ip_score(c, ip),
        lambda c: _sni_score(c, sni),
        lambda c: (
            (1 if c.filter_chain_match.transport_protocol == transport else -1)
            if c.filter_chain_match.transport_protocol
            else None
        ),
        lambda c: (
            (1 if set(c.filter_chain_match.application_protocols) & set(alpn) else -1)
            if c.filter_chain_match.application_protocols
            else None
        ),
    ]
    for step in steps:
        chains = _narrow(chains, step)
        if not chains:
            break
    if not chains:
        return listener.default_filter_chain if listener.HasField("default_filter_chain") else None
    assert len(chains) == 1, f"ambiguous match on {listener.name}: {[c.name for c in chains]}"
    return chains[0]


def outbound_call(
    listeners: Sequence[listener_pb2.Listener], ip: str, port: int, **kw: object
) -> tuple[str, Chain | None]:
    """(listener name, chain) for a connection the app opens to ip:port."""
    by_addr = {
        (lst.address.socket_address.address, lst.address.socket_address.port_value): lst
        for lst in listeners
    }
    listener = by_addr.get((ip, port)) or by_addr.get(("0.0.0.0", port))
    if listener is None:
        listener = next(lst for lst in listeners if lst.name == "virtualOutbound")
    return listener.name, select_chain(listener, port, ip=ip, **kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Target:
    """What a chain does: `tcp` to a cluster (or weighted clusters), `rds` by name, or
    `inline` route config (name, first route's cluster)."""

    kind: str
    name: str
    detail: object = None


def hcm_of(chain: Chain) -> hcm_pb2.HttpConnectionManager | None:
    for f in chain.filters:
        if f.name == Filters.HCM:
            hcm = hcm_pb2.HttpConnectionManager()
            f.typed_config.Unpack(hcm)
            return hcm
    return None


def tcp_proxy_of(chain: Chain) -> tcp_proxy_pb2.TcpProxy | None:
    for f in chain.filters:
        if f.name == Filters.TCP_PROXY:
            proxy = tcp_proxy_pb2.TcpProxy()
            f.typed_config.Unpack(proxy)
            return proxy
    return None


def target(chain: Chain | None) -> Target | None:
    if chain is None:
        return None
    hcm = hcm_of(chain)
    if hcm is not None:
        if hcm.HasField("rds"):
            return Target("rds", hcm.rds.route_config_name)
        rc = hcm.route_config
        return Target("inline", rc.name, rc.virtual_hosts[0].routes[0].route.cluster)
    proxy = tcp_proxy_of(chain)
    assert proxy is not None, "chain has neither HCM nor tcp_proxy"
    if proxy.cluster:
        return Target("tcp", proxy.cluster)
    weights = {c.name: c.weight for c in proxy.weighted_clusters.clusters}
    return Target("weighted", proxy.stat_prefix, weights)
