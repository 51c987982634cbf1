"""The capture listeners iptables redirects to: virtualOutbound (15001), virtualInbound (15006)."""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.type.v3 import range_pb2

from meshpilot.xds.generate.listeners.chain_opts import PLAINTEXT_HTTP_ALPNS, TLS
from meshpilot.xds.generate.listeners.context import SidecarContext
from meshpilot.xds.generate.listeners.filters import (
    http_inspector,
    original_dst,
    original_src,
    simple_tcp_proxy,
    socket_address,
    tls_inspector,
)
from meshpilot.xds.names import (
    BLACKHOLE_CLUSTER,
    VIRTUAL_INBOUND,
    VIRTUAL_INBOUND_PORT,
    VIRTUAL_OUTBOUND,
    VIRTUAL_OUTBOUND_BLACKHOLE,
    VIRTUAL_OUTBOUND_CATCHALL_TCP,
    VIRTUAL_OUTBOUND_PORT,
)
from meshpilot.xds.protos import boolean, duration, u32

__all__ = ["catch_all_filters", "virtual_inbound", "virtual_outbound"]

Predicate = lc_pb2.ListenerFilterChainMatchPredicate


def catch_all_filters(ctx: SidecarContext) -> list[lc_pb2.Filter]:
    """tcp_proxy for traffic to unknown destinations: PassthroughCluster under ALLOW_ANY,
    BlackHoleCluster under REGISTRY_ONLY (the scope's outboundTrafficPolicy)."""
    return [simple_tcp_proxy(ctx.catch_all_cluster)]


def virtual_outbound(ctx: SidecarContext) -> listener_pb2.Listener:
    """0.0.0.0:15001 hands each connection to the listener of its original destination
    (use_original_dst); what matches none lands on the catch-all chain."""
    blackhole = lc_pb2.FilterChain(
        name=VIRTUAL_OUTBOUND_BLACKHOLE,
        # A connection addressed to 15001 itself would be passed through back to 15001.
        filter_chain_match=lc_pb2.FilterChainMatch(destination_port=u32(VIRTUAL_OUTBOUND_PORT)),
        filters=[simple_tcp_proxy(BLACKHOLE_CLUSTER)],
    )
    catch_all = lc_pb2.FilterChain(
        name=VIRTUAL_OUTBOUND_CATCHALL_TCP, filters=catch_all_filters(ctx)
    )
    return listener_pb2.Listener(
        name=VIRTUAL_OUTBOUND,
        address=socket_address(ctx.wildcard, VIRTUAL_OUTBOUND_PORT),
        use_original_dst=boolean(True),
        filter_chains=[blackhole, catch_all],
        traffic_direction=base_pb2.OUTBOUND,
        transparent=boolean(True) if ctx.proxy.tproxy else None,
    )


def virtual_inbound(
    ctx: SidecarContext, chains: Sequence[lc_pb2.FilterChain]
) -> listener_pb2.Listener:
    listener = listener_pb2.Listener(
        name=VIRTUAL_INBOUND,
        address=socket_address(ctx.wildcard, VIRTUAL_INBOUND_PORT),
        filter_chains=chains,
        traffic_direction=base_pb2.INBOUND,
        continue_on_listener_filters_timeout=True,
        listener_filters_timeout=duration(ctx.push.mesh.protocol_detection_timeout),
        transparent=boolean(True) if ctx.proxy.tproxy else None,
    )
    listener.listener_filters.append(original_dst())
    if ctx.proxy.tproxy:  # TPROXY kept the caller's address: Envoy passes it on
        listener.listener_filters.append(original_src())
    listener.listener_filters.extend(_inspectors(chains))
    return listener


def _inspectors(chains: Sequence[lc_pb2.FilterChain]) -> list[lc_pb2.ListenerFilter]:
    """TLS then HTTP inspector (TLS first: once it marks a connection TLS the HTTP inspector
    leaves it alone), each switched off on the ports none of whose chains need it."""
    needs: dict[int, tuple[bool, bool]] = {}  # port -> (tls, http); 0 is "any other port"
    for chain in chains:
        match = chain.filter_chain_match
        port = match.destination_port.value if match.HasField("destination_port") else 0
        tls = match.transport_protocol == TLS
        http = any(p in PLAINTEXT_HTTP_ALPNS for p in match.application_protocols)
        old_tls, old_http = needs.get(port, (False, False))
        needs[port] = (old_tls or tls, old_http or http)
    out = []
    if any(tls for tls, _ in needs.values()):
        out.append(_tls_inspector(needs))
    if any(http for _, http in needs.values()):
        disabled = sorted(p for p, (_, http) in needs.items() if not http)
        out.append(_with_disabled(http_inspector(), _ports_predicate(disabled)))
    return out


def _tls_inspector(needs: dict[int, tuple[bool, bool]]) -> lc_pb2.ListenerFilter:
    """Istio's buildTLSInspector: when the catch-all chains need TLS detection the inspector
    runs everywhere except the ports that do not; otherwise only on the ports that do."""
    if needs.get(0, (False, False))[0]:
        disabled = sorted(p for p, (tls, _) in needs.items() if p and not tls)
        return _with_disabled(tls_inspector(), _ports_predicate(disabled))
    enabled = sorted(p for p, (tls, _) in needs.items() if p and tls)
    predicate = _ports_predicate(enabled)
    return _with_disabled(tls_inspector(), Predicate(not_match=predicate) if predicate else None)


def _with_disabled(
    listener_filter: lc_pb2.ListenerFilter,
    predicate: lc_pb2.ListenerFilterChainMatchPredicate | None,
) -> lc_pb2.ListenerFilter:
    if predicate is not None:
        listener_filter.filter_disabled.CopyFrom(predicate)
    return listener_filter


def _ports_predicate(ports: list[int]) -> lc_pb2.ListenerFilterChainMatchPredicate | None:
    """Matches connections to any of `ports` (ranges are [start, end))."""
    rules = [
        Predicate(destination_port_range=range_pb2.Int32Range(start=p, end=p + 1)) for p in ports
    ]
    if not rules:
        return None
    if len(rules) == 1:
        return rules[0]
    return Predicate(or_match=Predicate.MatchSet(rules=rules))
