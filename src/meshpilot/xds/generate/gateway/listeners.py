"""Gateway listeners: one per bind and translated port (Istio's buildGatewayListeners and
buildGatewayListener).

`0.0.0.0_<targetPort>` (`::` for IPv6-only pods, or the server's bind), binding the port
itself, direction OUTBOUND, accepting one connection per socket event (Istio's default
MAX_CONNECTIONS_PER_SOCKET_EVENT_LOOP). A chain without SNI or ALPN needs no match; sorted SNI
names otherwise (`*` means any). tls_inspector is added when a chain matches on SNI or offers
ALPN. Every chain gets Istio's 15s transport socket connect timeout. A port whose servers
yield no chain gets no listener.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from envoy.config.core.v3 import address_pb2, base_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2

from meshpilot.model.merged_gateway import merged_gateway_for
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.extensions import apply_wasm_plugins
from meshpilot.xds.generate.gateway.chain import ChainSpec, GatewayBuild
from meshpilot.xds.generate.gateway.servers import chains_for_port
from meshpilot.xds.generate.gateway.tls import downstream_tls_socket
from meshpilot.xds.generate.security.apply import secure_gateway_listeners
from meshpilot.xds.generate.telemetry import apply_telemetry
from meshpilot.xds.names import listener_name
from meshpilot.xds.protos import Filters, duration, pack, u32

__all__ = ["generate_gateway_listeners", "wildcard_address"]

TRANSPORT_SOCKET_CONNECT_TIMEOUT = 15_000_000_000
MAX_CONNECTIONS_PER_SOCKET_EVENT = 1


@dataclass(slots=True)
class _Pending:
    bind: str
    port: int
    chains: list[ChainSpec] = field(default_factory=list)


def wildcard_address(proxy: Proxy) -> str:
    """`::` for a pod with only IPv6 addresses, else `0.0.0.0` (dual stack is off by default)."""
    ips = proxy.ip_addresses
    return "::" if ips and all(":" in ip for ip in ips) else "0.0.0.0"


def _match(chain: ChainSpec) -> listener_components_pb2.FilterChainMatch | None:
    """Istio's toFilterChainMatch: nothing to match means no match at all."""
    sni = () if "*" in chain.sni_hosts else tuple(sorted(chain.sni_hosts))
    if not sni and not chain.application_protocols:
        return None
    return listener_components_pb2.FilterChainMatch(
        server_names=sni, application_protocols=chain.application_protocols
    )


def _filter_chain(chain: ChainSpec) -> listener_components_pb2.FilterChain:
    out = listener_components_pb2.FilterChain(
        filters=chain.filters,
        transport_socket_connect_timeout=duration(TRANSPORT_SOCKET_CONNECT_TIMEOUT),
    )
    match = _match(chain)
    if match is not None:
        out.filter_chain_match.CopyFrom(match)
    if chain.tls is not None:
        out.transport_socket.CopyFrom(downstream_tls_socket(chain.tls))
    return out


def _needs_tls_inspector(chains: list[ChainSpec]) -> bool:
    return any(
        c.sni_hosts or (c.tls is not None and c.tls.common_tls_context.alpn_protocols)
        for c in chains
    )


def _listener(name: str, pending: _Pending) -> listener_pb2.Listener:
    out = listener_pb2.Listener(
        name=name,
        address=address_pb2.Address(
            socket_address=address_pb2.SocketAddress(address=pending.bind, port_value=pending.port)
        ),
        filter_chains=[_filter_chain(c) for c in pending.chains],
        traffic_direction=base_pb2.OUTBOUND,
        max_connections_to_accept_per_socket_event=u32(MAX_CONNECTIONS_PER_SOCKET_EVENT),
    )
    if _needs_tls_inspector(pending.chains):
        out.listener_filters.append(
            listener_components_pb2.ListenerFilter(
                name=Filters.TLS_INSPECTOR, typed_config=pack(tls_inspector_pb2.TlsInspector())
            )
        )
    return out


def generate_gateway_listeners(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[listener_pb2.Listener]:
    merged = merged_gateway_for(push, proxy)
    if merged is None:
        return []
    build = GatewayBuild(push, proxy, merged)
    pending: dict[str, _Pending] = {}
    for sp in merged.server_ports:
        bind = sp.bind or wildcard_address(proxy)
        name = listener_name(bind, sp.number)
        entry = pending.setdefault(name, _Pending(bind, sp.number))
        entry.chains.extend(chains_for_port(build, sp, merged.merged_servers[sp], name))
    listeners = [
        _listener(name, p)
        for name, p in pending.items()
        if p.chains and (names is None or name in names)
    ]
    secured = secure_gateway_listeners(push, proxy, listeners)  # jwt_authn and RBAC
    return apply_wasm_plugins(push, proxy, apply_telemetry(push, proxy, secured))
