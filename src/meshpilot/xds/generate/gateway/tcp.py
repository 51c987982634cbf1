"""tcp_proxy filters for gateway TCP, terminated-TLS and passthrough chains (Istio's
buildOutboundNetworkFilters).

One destination: `stat_prefix` and `cluster` are the cluster name. Several: weighted clusters
(weight 0 dropped) with `stat_prefix` `<vs-name>.<vs-namespace>`. The destination's
DestinationRule gives the idle timeout, the maximum connection duration and source-IP hashing.
Istio's TCP metadata-exchange filter is not emitted (not in stock Envoy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envoy.config.listener.v3 import listener_components_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.type.v3 import hash_policy_pb2

from meshpilot.config.hosts import resolve_host
from meshpilot.config.istio.destination_rule import DestinationRule
from meshpilot.config.istio.virtual_service import Destination, RouteDestination
from meshpilot.model.indexes.virtual_services import BoundVirtualService
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Service
from meshpilot.xds.names import outbound_cluster
from meshpilot.xds.protos import Filters, duration, pack

__all__ = ["TcpTarget", "single_destination_filters", "tcp_route_filters"]


@dataclass(frozen=True, slots=True)
class TcpTarget:
    """What a tcp_proxy needs to know about one proxy's view of the mesh."""

    push: PushContext
    proxy: Proxy

    def service(self, hostname: str) -> Service | None:
        return self.push.proxy_scope(self.proxy).service(hostname)

    def rule(self, svc: Service | None) -> DestinationRule | None:
        if svc is None:
            return None
        bound = self.push.destination_rule(self.proxy, svc)
        return bound.obj.model if bound is not None else None


def destination_cluster(dest: Destination, host: str, svc: Service | None, port: int) -> str:
    """Istio's GetDestinationCluster: explicit port, else the service's only port, else the
    server port."""
    if dest.port is not None and dest.port.number:
        port = dest.port.number
    elif svc is not None and len(svc.ports) == 1:
        port = svc.ports[0].port
    return outbound_cluster(port, dest.subset, host)


def _apply_rule(proxy: tcp_proxy_pb2.TcpProxy, rule: DestinationRule | None, subset: str) -> None:
    if rule is None:
        return
    policy = rule.spec.traffic_policy
    pool = policy.connection_pool if policy is not None else None
    tcp = pool.tcp if pool is not None else None
    if tcp is not None and tcp.idle_timeout is not None:
        proxy.idle_timeout.CopyFrom(duration(tcp.idle_timeout))
    if tcp is not None and tcp.max_connection_duration is not None:
        proxy.max_downstream_connection_duration.CopyFrom(duration(tcp.max_connection_duration))
    lb = policy.load_balancer if policy is not None else None
    use_source_ip = bool(lb and lb.consistent_hash and lb.consistent_hash.use_source_ip)
    sub = next((s for s in rule.spec.subsets if s.name == subset), None)
    if sub is not None and sub.traffic_policy and sub.traffic_policy.load_balancer:
        sub_hash = sub.traffic_policy.load_balancer.consistent_hash
        use_source_ip = bool(sub_hash and sub_hash.use_source_ip)
    if use_source_ip:
        proxy.hash_policy.append(
            hash_policy_pb2.HashPolicy(source_ip=hash_policy_pb2.HashPolicy.SourceIp())
        )


def _filter(proxy: tcp_proxy_pb2.TcpProxy) -> listener_components_pb2.Filter:
    return listener_components_pb2.Filter(name=Filters.TCP_PROXY, typed_config=pack(proxy))


def single_destination_filters(
    cluster: str, stat_prefix: str, rule: DestinationRule | None, subset: str = ""
) -> list[listener_components_pb2.Filter]:
    proxy = tcp_proxy_pb2.TcpProxy(stat_prefix=stat_prefix, cluster=cluster)
    _apply_rule(proxy, rule, subset)
    return [_filter(proxy)]


def tcp_route_filters(
    target: TcpTarget,
    routes: Sequence[RouteDestination],
    server_port: int,
    vs: BoundVirtualService,
) -> list[listener_components_pb2.Filter]:
    """The network filters of a VirtualService `tcp` or `tls` route on a gateway server."""
    suffix = target.push.domain_suffix
    hosts = [resolve_host(r.destination.host, vs.namespace, suffix) for r in routes]
    services = [target.service(h) for h in hosts]
    rule = target.rule(services[0])
    if len(routes) == 1:
        dest = routes[0].destination
        cluster = destination_cluster(dest, hosts[0], services[0], server_port)
        return single_destination_filters(cluster, cluster, rule, dest.subset)
    weighted = tcp_proxy_pb2.TcpProxy.WeightedCluster()
    for route, host, svc in zip(routes, hosts, services, strict=True):
        if route.weight > 0:
            weighted.clusters.append(
                tcp_proxy_pb2.TcpProxy.WeightedCluster.ClusterWeight(
                    name=destination_cluster(route.destination, host, svc, server_port),
                    weight=route.weight,
                )
            )
    if not weighted.clusters:
        return []
    proxy = tcp_proxy_pb2.TcpProxy(
        stat_prefix=f"{vs.name}.{vs.namespace}", weighted_clusters=weighted
    )
    _apply_rule(proxy, rule, "")
    return [_filter(proxy)]
