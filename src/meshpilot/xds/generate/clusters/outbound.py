"""Outbound clusters: one per service port, plus one per DestinationRule subset."""

from __future__ import annotations

from collections.abc import Mapping

from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.network.dns_resolver.cares.v3 import cares_dns_resolver_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as hpo_pb2

from meshpilot.config.istio.destination_rule import TrafficPolicy
from meshpilot.model.indexes.destination_rules import BoundDestinationRule
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.model.traffic_policy import effective_traffic_policy
from meshpilot.registry.model import Resolution, Service, ServicePort
from meshpilot.xds.generate.clusters.common import (
    attach_protocol_options,
    base_cluster,
    istio_metadata,
    protocol_options,
    set_eds,
)
from meshpilot.xds.generate.clusters.tls import upstream_tls_socket
from meshpilot.xds.generate.clusters.traffic_policy import apply_traffic_policy
from meshpilot.xds.generate.endpoints import locality_endpoints
from meshpilot.xds.names import outbound_cluster, sni_name
from meshpilot.xds.protos import duration, pack

__all__ = ["build_outbound_clusters"]

_TYPE = {
    Resolution.CLIENT_SIDE_LB: cluster_pb2.Cluster.EDS,
    Resolution.DNS_LB: cluster_pb2.Cluster.STRICT_DNS,
    Resolution.DNS_ROUND_ROBIN: cluster_pb2.Cluster.LOGICAL_DNS,
    Resolution.PASSTHROUGH: cluster_pb2.Cluster.ORIGINAL_DST,
}
_CARES_UDP_MAX_QUERIES = 100  # Istio's PILOT_DNS_CARES_UDP_MAX_QUERIES default


def build_outbound_clusters(
    push: PushContext, proxy: Proxy, svc: Service
) -> list[cluster_pb2.Cluster]:
    """Clusters for every TCP port of `svc` as this proxy sees it (its DestinationRule chosen
    by Istio's namespace precedence)."""
    rule = push.destination_rule(proxy, svc)
    out: list[cluster_pb2.Cluster] = []
    for port in svc.ports:
        if port.protocol.value == "UDP":
            continue
        default = _build(push, proxy, svc, port, "", rule, None)
        if default is not None:
            out.append(default)
        for subset in rule.obj.model.spec.subsets if rule else ():
            built = _build(push, proxy, svc, port, subset.name, rule, subset.labels)
            if built is not None:
                out.append(built)
    return out


def _build(
    push: PushContext,
    proxy: Proxy,
    svc: Service,
    port: ServicePort,
    subset: str,
    rule: BoundDestinationRule | None,
    subset_labels: Mapping[str, str] | None,
) -> cluster_pb2.Cluster | None:
    name = outbound_cluster(port.port, subset, svc.hostname)
    kind = _TYPE[svc.resolution]
    cluster = base_cluster(name, kind, push.mesh.connect_timeout)
    if kind in (cluster_pb2.Cluster.STRICT_DNS, cluster_pb2.Cluster.LOGICAL_DNS):
        assignment = locality_endpoints(push, svc, port.port, subset_labels)
        if not assignment:
            return None  # Istio drops DNS clusters without endpoints
        _dns_settings(push, cluster)
        cluster.load_assignment.cluster_name = name
        cluster.load_assignment.endpoints.extend(assignment)
    policy = effective_traffic_policy(rule.obj.model if rule else None, port.port, subset)
    options = protocol_options(port.protocol, sniff=proxy.type is ProxyType.SIDECAR)
    options = apply_traffic_policy(cluster, policy, options)
    if cluster.type == cluster_pb2.Cluster.EDS:
        set_eds(cluster)
    _apply_tls(cluster, policy, svc, port, subset, options)
    attach_protocol_options(cluster, options)
    istio_metadata(
        cluster,
        [svc],
        (rule.namespace, rule.obj.name) if rule else None,
        subset,
        external=svc.mesh_external,
    )
    return cluster


def _dns_settings(push: PushContext, cluster: cluster_pb2.Cluster) -> None:
    cluster.dns_lookup_family = cluster_pb2.Cluster.V4_ONLY
    cluster.respect_dns_ttl = True
    cluster.dns_refresh_rate.CopyFrom(duration(push.mesh.dns_refresh_rate))
    resolver = cares_dns_resolver_pb2.CaresDnsResolverConfig()
    resolver.udp_max_queries.value = _CARES_UDP_MAX_QUERIES
    cluster.typed_dns_resolver_config.name = "envoy.network.dns_resolver.cares"
    cluster.typed_dns_resolver_config.typed_config.CopyFrom(pack(resolver))


def _apply_tls(
    cluster: cluster_pb2.Cluster,
    policy: TrafficPolicy | None,
    svc: Service,
    port: ServicePort,
    subset: str,
    options: hpo_pb2.HttpProtocolOptions | None,
) -> None:
    """Explicit DestinationRule TLS. Automatic mTLS (transport_socket_matches) is added by the
    security builders on top of this, only where no explicit mode is set."""
    tls = policy.tls if policy else None
    if tls is None:
        return
    http2 = port.protocol.is_http2 or (
        options is not None
        and options.HasField("explicit_http_config")
        and options.explicit_http_config.HasField("http2_protocol_options")
    )
    socket = upstream_tls_socket(
        tls, sni_name(port.port, subset, svc.hostname), svc.service_accounts, http2
    )
    if socket is not None:
        cluster.transport_socket.CopyFrom(socket)
