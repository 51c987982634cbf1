"""Inbound filter chains of `virtualInbound`: one set per served target port, plus the
catch-all passthrough chains and the loop-protection blackhole (Istio's listener_inbound.go).
"""

from __future__ import annotations

from dataclasses import dataclass

from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from meshpilot.registry.model import Protocol
from meshpilot.xds.generate.listeners.chain_opts import TLS
from meshpilot.xds.generate.listeners.context import SidecarContext
from meshpilot.xds.generate.listeners.filters import simple_tcp_proxy
from meshpilot.xds.generate.listeners.hcm import hcm_filter, inbound_hcm
from meshpilot.xds.generate.listeners.inbound_tls import (
    ChainProtocol,
    ChainVariant,
    MatchOption,
    chain_variants,
    mtls_for_passthrough,
    mtls_for_port,
)
from meshpilot.xds.generate.security.apply import secure_inbound_chains
from meshpilot.xds.generate.service_targets import service_targets
from meshpilot.xds.names import (
    BLACKHOLE_CLUSTER,
    DEFAULT_ROUTE,
    INBOUND_PASSTHROUGH_CLUSTER,
    VIRTUAL_INBOUND,
    VIRTUAL_INBOUND_BLACKHOLE,
    VIRTUAL_INBOUND_CATCHALL_HTTP,
    VIRTUAL_INBOUND_PORT,
    delimited_stat_prefix,
    inbound_cluster,
    inbound_vhost,
    listener_name,
    trace_operation,
)
from meshpilot.xds.protos import Filters, boolean, duration, pack, u32

__all__ = [
    "InboundChainConfig",
    "chain_protocol",
    "inbound_chain_configs",
    "inbound_filter_chains",
    "port_chains",
]

# Inbound retries only replay requests that never reached the app (Istio's default).
INBOUND_RETRY_ON = "reset-before-request"
INBOUND_RETRIES = 2


@dataclass(frozen=True, slots=True)
class InboundChainConfig:
    """One served port (or the passthrough catch-all, port 0)."""

    cluster: str
    target_port: int  # matched as destination_port; 0 matches any port
    service_port: int  # names the vhost and the trace operation (Istio uses the service port)
    hostname: str  # the service, for the trace operation; "" for passthrough
    protocol: ChainProtocol
    http2: bool = False
    grpc: bool = False
    passthrough: bool = False
    bind: str = "0.0.0.0"
    # A Sidecar ingress listener's own TLS: terminated instead of the mTLS variants.
    tls_context: tls_pb2.DownstreamTlsContext | None = None

    def name(self, protocol: ChainProtocol) -> str:
        if self.passthrough:
            return (
                VIRTUAL_INBOUND_CATCHALL_HTTP if protocol is ChainProtocol.HTTP else VIRTUAL_INBOUND
            )
        return listener_name(self.bind, self.target_port)

    @property
    def stat_prefix(self) -> str:
        base = self.cluster if self.passthrough else f"inbound_{self.name(ChainProtocol.HTTP)}"
        return delimited_stat_prefix(base)


def chain_protocol(protocol: Protocol) -> ChainProtocol:
    if protocol.is_http:
        return ChainProtocol.HTTP
    if protocol.is_tcp:
        return ChainProtocol.TCP
    return ChainProtocol.AUTO


def inbound_chain_configs(ctx: SidecarContext) -> list[InboundChainConfig]:
    """One config per target port the workload serves, sorted by port. When two services
    target the same port, the first one found wins (Istio keeps the oldest Service)."""
    by_port: dict[int, InboundChainConfig] = {}
    for svc, ep in service_targets(ctx.push, ctx.proxy):
        port = svc.port(ep.service_port)
        if port is None or ep.port in by_port or port.protocol is Protocol.UDP:
            continue
        by_port[ep.port] = InboundChainConfig(
            cluster=inbound_cluster(ep.port),
            target_port=ep.port,
            service_port=port.port,
            hostname=svc.hostname,
            protocol=chain_protocol(port.protocol),
            http2=port.protocol.is_http2,
            grpc=port.protocol in (Protocol.GRPC, Protocol.GRPC_WEB),
            bind=ctx.wildcard,
        )
    return [by_port[p] for p in sorted(by_port)]


def _route_config(cc: InboundChainConfig) -> route_pb2.RouteConfiguration:
    """Inline route config `inbound|<port>||`: one `*` vhost sending everything to the app."""
    action = rc_pb2.RouteAction(
        cluster=cc.cluster,
        timeout=duration(0),
        max_stream_duration=rc_pb2.RouteAction.MaxStreamDuration(
            max_stream_duration=duration(0), grpc_timeout_header_max=duration(0)
        ),
    )
    if not cc.grpc:
        # reset-before-request does not suit gRPC streams (Istio skips it for gRPC).
        action.retry_policy.CopyFrom(
            rc_pb2.RetryPolicy(retry_on=INBOUND_RETRY_ON, num_retries=u32(INBOUND_RETRIES))
        )
    route = rc_pb2.Route(
        name=DEFAULT_ROUTE,
        match=rc_pb2.RouteMatch(prefix="/"),
        decorator=rc_pb2.Decorator(operation=trace_operation(cc.hostname, cc.service_port)),
        route=action,
    )
    vhost = rc_pb2.VirtualHost(name=inbound_vhost(cc.service_port), domains=["*"], routes=[route])
    return route_pb2.RouteConfiguration(
        name=cc.cluster, virtual_hosts=[vhost], validate_clusters=boolean(False)
    )


def _filters(cc: InboundChainConfig, protocol: ChainProtocol) -> list[lc_pb2.Filter]:
    if protocol is ChainProtocol.HTTP:
        return [hcm_filter(inbound_hcm(cc.stat_prefix, _route_config(cc), cc.http2))]
    return [simple_tcp_proxy(cc.cluster)]


def _transport_socket(context: tls_pb2.DownstreamTlsContext) -> base_pb2.TransportSocket:
    return base_pb2.TransportSocket(name=Filters.TLS_TRANSPORT, typed_config=pack(context))


def _chain(cc: InboundChainConfig, variant: ChainVariant) -> lc_pb2.FilterChain:
    option = variant.option
    match = lc_pb2.FilterChainMatch(
        transport_protocol=option.transport_protocol,
        application_protocols=option.application_protocols,
    )
    if cc.target_port:
        match.destination_port.CopyFrom(u32(cc.target_port))
    chain = lc_pb2.FilterChain(
        name=cc.name(option.protocol),
        filter_chain_match=match,
        filters=_filters(cc, option.protocol),
    )
    if variant.tls_context is not None:
        chain.transport_socket.CopyFrom(_transport_socket(variant.tls_context))
    return chain


def _blackhole() -> lc_pb2.FilterChain:
    """Traffic addressed to 15006 itself would loop through the listener forever."""
    return lc_pb2.FilterChain(
        name=VIRTUAL_INBOUND_BLACKHOLE,
        filter_chain_match=lc_pb2.FilterChainMatch(destination_port=u32(VIRTUAL_INBOUND_PORT)),
        filters=[simple_tcp_proxy(BLACKHOLE_CLUSTER)],
    )


def _passthrough_chains(ctx: SidecarContext, served: frozenset[int]) -> list[lc_pb2.FilterChain]:
    """Any port no service declares still reaches the app (InboundPassthroughCluster)."""
    chains: list[lc_pb2.FilterChain] = []
    for settings in mtls_for_passthrough(ctx, served):
        cc = InboundChainConfig(
            cluster=INBOUND_PASSTHROUGH_CLUSTER,
            target_port=settings.port,
            service_port=0,
            hostname="",
            protocol=ChainProtocol.AUTO,
            passthrough=True,
        )
        chains.extend(_chain(cc, v) for v in chain_variants(cc.protocol, settings))
    return chains


def port_chains(ctx: SidecarContext, cc: InboundChainConfig) -> list[lc_pb2.FilterChain]:
    """The chains of one served port, one per mTLS match variant."""
    if cc.tls_context is not None:
        protocol = ChainProtocol.TCP if cc.protocol is ChainProtocol.TCP else ChainProtocol.HTTP
        option = MatchOption(protocol, TLS, tls=True)
        return [_chain(cc, ChainVariant(option, cc.tls_context))]
    settings = mtls_for_port(ctx, cc.target_port)
    return [_chain(cc, v) for v in chain_variants(cc.protocol, settings)]


def inbound_filter_chains(
    ctx: SidecarContext, configs: list[InboundChainConfig] | None = None
) -> list[lc_pb2.FilterChain]:
    """All chains of virtualInbound in Istio's order: blackhole, passthrough, then ports.
    `configs` replaces the service-derived ports (a Sidecar's `ingress` listeners)."""
    configs = inbound_chain_configs(ctx) if configs is None else configs
    served = frozenset(cc.target_port for cc in configs)
    chains = [_blackhole(), *_passthrough_chains(ctx, served)]
    for cc in configs:
        chains.extend(port_chains(ctx, cc))
    return secure_inbound_chains(ctx, chains)  # jwt_authn and RBAC (security/apply.py)
