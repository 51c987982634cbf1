"""Outbound clusters: one per service port, plus one per DestinationRule subset.

Most of a cluster is decided by its traffic policy, protocol and discovery type, which many
clusters share; that part is built once per push as a template and copied (a C-level copy),
then the cluster's own names, metadata, TLS and DNS endpoints are set.
"""

from __future__ import annotations

from collections.abc import Mapping

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.extensions.network.dns_resolver.cares.v3 import cares_dns_resolver_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as hpo_pb2

from meshpilot.config.istio.destination_rule import TrafficPolicy
from meshpilot.model.indexes.destination_rules import BoundDestinationRule
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.model.traffic_policy import effective_traffic_policy
from meshpilot.registry.model import Protocol, Resolution, Service, ServicePort
from meshpilot.xds.generate.clusters.common import (
    attach_protocol_options,
    base_cluster,
    istio_metadata,
    protocol_options,
    set_eds,
)
from meshpilot.xds.generate.clusters.locality import apply_locality_cluster
from meshpilot.xds.generate.clusters.mtls import (
    MUTUAL_SDS_NAMES,
    add_auto_mtls_matches,
    istio_mutual_socket,
    push_trust_domains,
    uses_auto_mtls,
)
from meshpilot.xds.generate.clusters.tls import upstream_tls_socket
from meshpilot.xds.generate.clusters.traffic_policy import apply_traffic_policy
from meshpilot.xds.generate.endpoints import locality_endpoints
from meshpilot.xds.generate.references import remember_references
from meshpilot.xds.names import outbound_cluster, sni_name
from meshpilot.xds.protos import duration, pack

__all__ = ["build_outbound_clusters"]

_TYPE = {
    Resolution.CLIENT_SIDE_LB: cluster_pb2.Cluster.EDS,
    Resolution.DNS_LB: cluster_pb2.Cluster.STRICT_DNS,
    Resolution.DNS_ROUND_ROBIN: cluster_pb2.Cluster.LOGICAL_DNS,
    Resolution.PASSTHROUGH: cluster_pb2.Cluster.ORIGINAL_DST,
}
_DNS_TYPES = (cluster_pb2.Cluster.STRICT_DNS, cluster_pb2.Cluster.LOGICAL_DNS)
_CARES_UDP_MAX_QUERIES = 100  # Istio's PILOT_DNS_CARES_UDP_MAX_QUERIES default
_TEMPLATES = "clusters.templates"
_METADATA = "clusters.metadata"


def build_outbound_clusters(
    push: PushContext, proxy: Proxy, svc: Service
) -> list[cluster_pb2.Cluster]:
    """Clusters for every TCP port of `svc` as this proxy sees it (its DestinationRule chosen
    by Istio's namespace precedence)."""
    rule = push.destination_rule(proxy, svc)
    subsets = rule.obj.model.spec.subsets if rule else []
    sniff = proxy.type is ProxyType.SIDECAR
    out: list[cluster_pb2.Cluster] = []
    for port in svc.ports:
        if port.protocol is Protocol.UDP:
            continue
        for subset, labels in (("", None), *((s.name, s.labels) for s in subsets)):
            built = _build(push, svc, port, subset, rule, labels, sniff)
            if built is not None:
                out.append(built)
    return out


def _build(
    push: PushContext,
    svc: Service,
    port: ServicePort,
    subset: str,
    rule: BoundDestinationRule | None,
    subset_labels: Mapping[str, str] | None,
    sniff: bool,
) -> cluster_pb2.Cluster | None:
    name = outbound_cluster(port.port, subset, svc.hostname)
    policy = effective_traffic_policy(rule.obj.model if rule else None, port.port, subset)
    template = _template(push, _TYPE[svc.resolution], port.protocol, sniff, policy)
    cluster = cluster_pb2.Cluster()
    cluster.CopyFrom(template)
    cluster.name = name
    cluster.alt_stat_name = name + ";"
    if cluster.type == cluster_pb2.Cluster.EDS:
        cluster.eds_cluster_config.service_name = name
    elif cluster.type in _DNS_TYPES:
        assignment = locality_endpoints(push, svc, port.port, subset_labels)
        if not assignment:
            return None  # Istio drops DNS clusters without endpoints
        cluster.load_assignment.cluster_name = name
        cluster.load_assignment.endpoints.extend(assignment)
    cluster.metadata.CopyFrom(_metadata(push, svc, rule))
    if subset:
        cluster.metadata.filter_metadata["istio"]["subset"] = subset
    sds = _apply_tls(
        push, cluster, svc, port, sni_name(port.port, subset, svc.hostname), policy, template
    )
    if sds is not None:
        remember_references(push, cluster, sds)
    return cluster


def _apply_tls(
    push: PushContext,
    cluster: cluster_pb2.Cluster,
    svc: Service,
    port: ServicePort,
    sni: str,
    policy: TrafficPolicy | None,
    template: cluster_pb2.Cluster,
) -> frozenset[str] | None:
    """DestinationRule TLS, else automatic mTLS (see mtls.py for the table). Returns the
    SDS names the cluster then refers to, None when not known here (the DR's own TLS)."""
    tls = policy.tls if policy else None
    http2 = _is_http2(port, template)
    known = (
        _NO_SDS
        if not template.HasField("transport_socket") and not template.transport_socket_matches
        else None
    )
    if tls is not None and tls.mode == "ISTIO_MUTUAL":
        sans = tls.subject_alt_names or push_trust_domains(push, svc.service_accounts)
        cluster.transport_socket.CopyFrom(istio_mutual_socket(push, tls.sni or sni, sans, http2))
        return MUTUAL_SDS_NAMES if known is not None else None
    if tls is not None:
        socket = upstream_tls_socket(tls, sni, svc.service_accounts, http2)
        if socket is not None:
            cluster.transport_socket.CopyFrom(socket)
            return None
    elif cluster.type != cluster_pb2.Cluster.ORIGINAL_DST and uses_auto_mtls(
        push, svc, policy, tls
    ):
        accounts = push_trust_domains(push, svc.service_accounts)
        add_auto_mtls_matches(push, cluster, sni, accounts, http2)
        return MUTUAL_SDS_NAMES if known is not None else None
    return known


_NO_SDS: frozenset[str] = frozenset()


def _template(
    push: PushContext,
    kind: cluster_pb2.Cluster.DiscoveryType,
    protocol: Protocol,
    sniff: bool,
    policy: TrafficPolicy | None,
) -> cluster_pb2.Cluster:
    """Everything but names, metadata and TLS, shared by clusters with the same policy object.
    Keyed by the policy's identity; the entry keeps the policy alive so the id stays unique."""
    templates = push.memo.setdefault(_TEMPLATES, {})
    assert isinstance(templates, dict)
    key = (kind, protocol, sniff, id(policy))
    found = templates.get(key)
    if found is not None:
        return found[1]
    cluster = base_cluster("", kind, push.mesh.connect_timeout)
    if kind in _DNS_TYPES:
        _dns_settings(push, cluster)
    options = apply_traffic_policy(cluster, policy, protocol_options(protocol, sniff=sniff))
    apply_locality_cluster(cluster, push.mesh, policy)
    if cluster.type == cluster_pb2.Cluster.EDS:
        set_eds(cluster)
    attach_protocol_options(cluster, options)
    templates[key] = (policy, cluster)
    return cluster


def _metadata(
    push: PushContext, svc: Service, rule: BoundDestinationRule | None
) -> base_pb2.Metadata:
    """The `istio` metadata of a service's clusters (services, DestinationRule provenance)."""
    memo = push.memo.setdefault(_METADATA, {})
    assert isinstance(memo, dict)
    key = (svc.hostname, svc.namespace, rule.obj.key if rule else None)
    found = memo.get(key)
    if found is None:
        holder = cluster_pb2.Cluster()
        istio_metadata(
            holder,
            [svc],
            (rule.namespace, rule.obj.name) if rule else None,
            external=svc.mesh_external,
        )
        found = memo[key] = holder.metadata
    return found


def _dns_settings(push: PushContext, cluster: cluster_pb2.Cluster) -> None:
    cluster.dns_lookup_family = cluster_pb2.Cluster.V4_ONLY
    cluster.respect_dns_ttl = True
    cluster.dns_refresh_rate.CopyFrom(duration(push.mesh.dns_refresh_rate))
    resolver = cares_dns_resolver_pb2.CaresDnsResolverConfig()
    resolver.udp_max_queries.value = _CARES_UDP_MAX_QUERIES
    cluster.typed_dns_resolver_config.name = "envoy.network.dns_resolver.cares"
    cluster.typed_dns_resolver_config.typed_config.CopyFrom(pack(resolver))


def _is_http2(port: ServicePort, template: cluster_pb2.Cluster) -> bool:
    """ALPN h2 for HTTP2 ports and for clusters a DestinationRule upgraded to HTTP2."""
    if port.protocol.is_http2:
        return True
    packed = template.typed_extension_protocol_options.get(
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    )
    if packed is None:
        return False
    options = hpo_pb2.HttpProtocolOptions()
    packed.Unpack(options)
    return bool(options.explicit_http_config.HasField("http2_protocol_options"))
