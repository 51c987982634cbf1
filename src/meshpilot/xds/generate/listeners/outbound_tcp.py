"""Outbound TCP and TLS chains: tcp_proxy to a service, or as VirtualService `tcp` / `tls`
routes say (Istio's tls.go and networkfilter.go)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.type.v3 import hash_policy_pb2

from meshpilot.config.hosts import resolve_host
from meshpilot.config.istio.common import PortSelector
from meshpilot.config.istio.destination_rule import DestinationRule
from meshpilot.config.istio.virtual_service import (
    L4MatchAttributes,
    RouteDestination,
    TLSMatchAttributes,
)
from meshpilot.model.indexes.virtual_services import MESH_GATEWAY, BoundVirtualService
from meshpilot.registry.model import Service, ServicePort
from meshpilot.xds.generate.listeners.chain_opts import ChainOpts, config_metadata
from meshpilot.xds.generate.listeners.context import SidecarContext
from meshpilot.xds.generate.listeners.filters import tcp_proxy_filter
from meshpilot.xds.names import outbound_cluster
from meshpilot.xds.protos import duration

__all__ = ["tcp_chain_opts"]

VIRTUAL_SERVICE = "VirtualService"


def tcp_chain_opts(
    ctx: SidecarContext, svc: Service, port: ServicePort, cidrs: tuple[str, ...], bind: str
) -> list[ChainOpts]:
    """TLS ports get SNI chains, other TCP ports tcp_proxy chains; both may come from the
    VirtualServices of the service's host (Istio's buildSidecarOutboundTCPListenerOpts)."""
    virtual_services = ctx.virtual_services_for(svc.hostname)
    if port.protocol.is_tls:
        return _tls_opts(ctx, svc, port, cidrs, bind, virtual_services)
    return _tcp_opts(ctx, svc, port, cidrs, virtual_services)


def _static_match(
    match: L4MatchAttributes | TLSMatchAttributes, labels: Mapping[str, str], port: int, ns: str
) -> bool:
    """The parts of a match the control plane can decide for this proxy on this port."""
    return (
        (not match.gateways or MESH_GATEWAY in match.gateways)
        and all(labels.get(k) == v for k, v in match.source_labels.items())
        and (not match.port or match.port == port)
        and (not match.source_namespace or match.source_namespace == ns)
    )


def _tls_opts(
    ctx: SidecarContext,
    svc: Service,
    port: ServicePort,
    cidrs: tuple[str, ...],
    bind: str,
    virtual_services: Sequence[BoundVirtualService],
) -> list[ChainOpts]:
    out: list[ChainOpts] = []
    handled: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    proxy = ctx.proxy
    for vs in virtual_services:
        for tls in vs.obj.model.spec.tls:
            for match in tls.match:
                if not _static_match(match, proxy.labels, port.port, proxy.namespace):
                    continue
                subnets = tuple(match.destination_subnets) or cidrs
                # Later matches with the same SNI and subnets can never be reached.
                key = (tuple(match.sni_hosts), tuple(match.destination_subnets))
                if key in handled:
                    continue
                handled.add(key)
                out.append(
                    ChainOpts(
                        sni_hosts=tuple(match.sni_hosts),
                        destination_cidrs=subnets,
                        network_filters=tuple(_route_filters(ctx, tls.route, port, vs)),
                        metadata=config_metadata(VIRTUAL_SERVICE, vs.namespace, vs.name),
                    )
                )
    if out:
        return out
    # Without a VIP (or on a CIDR) the listener is shared: the SNI tells services apart.
    address = svc.vip or ctx.wildcard
    sni: tuple[str, ...] = ()
    if cidrs or "/" in address or (address == ctx.wildcard and bind == ctx.wildcard):
        sni = (svc.hostname,)
    cluster = outbound_cluster(_single_port(svc, port.port), "", svc.hostname)
    filters = _single_destination(cluster, cluster, "", _rule(ctx, svc))
    return [ChainOpts(sni_hosts=sni, destination_cidrs=cidrs, network_filters=(filters,))]


def _tcp_opts(
    ctx: SidecarContext,
    svc: Service,
    port: ServicePort,
    cidrs: tuple[str, ...],
    virtual_services: Sequence[BoundVirtualService],
) -> list[ChainOpts]:
    out: list[ChainOpts] = []
    proxy = ctx.proxy
    covered = False  # a VirtualService chain already matches what the service's would
    for vs in virtual_services:
        meta = config_metadata(VIRTUAL_SERVICE, vs.namespace, vs.name)
        for tcp in vs.obj.model.spec.tcp:
            filters = tuple(_route_filters(ctx, tcp.route, port, vs))
            matching = [
                m for m in tcp.match if _static_match(m, proxy.labels, port.port, proxy.namespace)
            ]
            # A route with no match, or a match without subnets, takes all the rest.
            if not tcp.match or any(not m.destination_subnets for m in matching):
                out.append(
                    ChainOpts(destination_cidrs=cidrs, network_filters=filters, metadata=meta)
                )
                return out
            subnets = tuple(s for m in matching for s in m.destination_subnets)
            if subnets:
                out.append(ChainOpts(destination_cidrs=subnets, network_filters=filters))
                covered = covered or sorted(subnets) == sorted(cidrs)
    if not covered:
        cluster = outbound_cluster(_single_port(svc, port.port), "", svc.hostname)
        default = _single_destination(cluster, cluster, "", _rule(ctx, svc))
        out.append(ChainOpts(destination_cidrs=cidrs, network_filters=(default,)))
    return out


def _single_port(svc: Service, listener_port: int) -> int:
    """A single-port service is reached on its port whatever the listener port."""
    return svc.ports[0].port if len(svc.ports) == 1 else listener_port


def _rule(ctx: SidecarContext, svc: Service | None) -> DestinationRule | None:
    if svc is None:
        return None
    bound = ctx.push.destination_rule(ctx.proxy, svc)
    return bound.obj.model if bound is not None else None


def _destination_host(dest_host: str, vs: BoundVirtualService, ctx: SidecarContext) -> str:
    return resolve_host(dest_host, vs.namespace, ctx.push.domain_suffix)


def _route_filters(
    ctx: SidecarContext,
    routes: Sequence[RouteDestination],
    port: ServicePort,
    vs: BoundVirtualService,
) -> list[lc_pb2.Filter]:
    """One destination: tcp_proxy to its cluster; several: weighted clusters named after
    the VirtualService (Istio's buildOutboundNetworkFilters)."""
    first_host = _destination_host(routes[0].destination.host, vs, ctx)
    rule = _rule(ctx, ctx.service(first_host))
    if len(routes) == 1:
        dest = routes[0].destination
        cluster = _cluster_for(ctx, first_host, dest.subset, dest.port, port.port)
        return [_single_destination(cluster, cluster, dest.subset, rule)]
    weighted = tcp_proxy_pb2.TcpProxy.WeightedCluster()
    for r in routes:
        if r.weight > 0:
            host = _destination_host(r.destination.host, vs, ctx)
            name = _cluster_for(ctx, host, r.destination.subset, r.destination.port, port.port)
            weighted.clusters.add(name=name, weight=r.weight)
    proxy = tcp_proxy_pb2.TcpProxy(
        stat_prefix=f"{vs.name}.{vs.namespace}", weighted_clusters=weighted
    )
    _apply_rule(proxy, rule, "")
    return [tcp_proxy_filter(proxy)]


def _cluster_for(
    ctx: SidecarContext, host: str, subset: str, dest_port: PortSelector | None, listener_port: int
) -> str:
    """Istio's GetDestinationCluster: the destination's port, else the only port of the
    service, else the listener port."""
    number = dest_port.number if dest_port is not None else 0
    if not number:
        svc = ctx.service(host)
        number = svc.ports[0].port if svc is not None and len(svc.ports) == 1 else listener_port
    return outbound_cluster(number, subset, host)


def _single_destination(
    stat_prefix: str, cluster: str, subset: str, rule: DestinationRule | None
) -> lc_pb2.Filter:
    proxy = tcp_proxy_pb2.TcpProxy(stat_prefix=stat_prefix, cluster=cluster)
    _apply_rule(proxy, rule, subset)
    return tcp_proxy_filter(proxy)


def _apply_rule(proxy: tcp_proxy_pb2.TcpProxy, rule: DestinationRule | None, subset: str) -> None:
    """DestinationRule settings Istio copies into tcp_proxy: TCP idle timeout, maximum
    connection duration (top-level policy) and source-IP consistent hashing."""
    if rule is None:
        return
    policy = rule.spec.traffic_policy
    tcp = policy.connection_pool.tcp if policy and policy.connection_pool else None
    if tcp is not None and tcp.idle_timeout is not None:
        proxy.idle_timeout.CopyFrom(duration(tcp.idle_timeout))
    if tcp is not None and tcp.max_connection_duration is not None:
        proxy.max_downstream_connection_duration.CopyFrom(duration(tcp.max_connection_duration))
    if _uses_source_ip(rule, subset):
        proxy.hash_policy.append(
            hash_policy_pb2.HashPolicy(source_ip=hash_policy_pb2.HashPolicy.SourceIp())
        )


def _uses_source_ip(rule: DestinationRule, subset: str) -> bool:
    policy = rule.spec.traffic_policy
    lb = policy.load_balancer if policy else None
    use = bool(lb and lb.consistent_hash and lb.consistent_hash.use_source_ip)
    sub = next((s for s in rule.spec.subsets if s.name == subset), None)
    sub_lb = sub.traffic_policy.load_balancer if sub and sub.traffic_policy else None
    if sub_lb is not None:
        # A subset load balancer overrides: source IP only if it says so itself.
        use = bool(sub_lb.consistent_hash and sub_lb.consistent_hash.use_source_ip)
    return use
