"""Outbound clusters: one per service port, plus one per DestinationRule subset.

Most of a cluster is decided by its traffic policy, protocol and discovery type, which many
clusters share; that part is built once per push as a template (one per distinct policy) and
serialized. A cluster is the template's bytes followed by its own names, metadata and
auto-mTLS socket matches, also serialized (encoded.py); a proxy class's clusters are parsed
together in C (batch_parse.py). DestinationRule TLS sockets and DNS endpoints, rarer, are
then set on the messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2
from envoy.extensions.network.dns_resolver.cares.v3 import cares_dns_resolver_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as hpo_pb2

from meshpilot.config.istio.destination_rule import TrafficPolicy
from meshpilot.config.istio.peer_authentication import MtlsMode
from meshpilot.model.indexes.destination_rules import BoundDestinationRule
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Protocol, Resolution, Service, ServicePort
from meshpilot.xds.generate.batch_parse import parse_many
from meshpilot.xds.generate.clusters.common import (
    attach_protocol_options,
    base_cluster,
    istio_metadata_struct,
    protocol_options,
    set_eds,
)
from meshpilot.xds.generate.clusters.encoded import identity_fields, metadata_field
from meshpilot.xds.generate.clusters.locality import apply_locality_cluster
from meshpilot.xds.generate.clusters.mtls import (
    MUTUAL_SDS_NAMES,
    auto_mtls_context,
    auto_mtls_matches,
    istio_mutual_socket,
    push_trust_domains,
    service_mtls_mode,
)
from meshpilot.xds.generate.clusters.tls import upstream_tls_socket
from meshpilot.xds.generate.clusters.traffic_policy import apply_traffic_policy
from meshpilot.xds.generate.endpoints import locality_endpoints
from meshpilot.xds.generate.references import remember_all
from meshpilot.xds.generate.traffic_policies import push_traffic_policy
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
    push: PushContext, proxy: Proxy, services: Iterable[Service]
) -> list[cluster_pb2.Cluster]:
    """Clusters for every TCP port of each service as this proxy sees it (its
    DestinationRule chosen by Istio's namespace precedence), parsed together."""
    sniff = proxy.type is ProxyType.SIDECAR
    pending = _Pending()
    for svc in services:
        rule = push.destination_rule(proxy, svc)
        subsets = rule.obj.model.spec.subsets if rule else []
        parts = _ServiceParts(push, svc, rule, sniff)
        for port in svc.ports:
            if port.protocol is Protocol.UDP:
                continue
            for subset, labels in (("", None), *((s.name, s.labels) for s in subsets)):
                _encode(push, svc, port, subset, rule, labels, parts, pending)
    clusters = parse_many(cluster_pb2.Cluster, pending.bodies)
    for i, (assignment, socket) in pending.extras.items():
        cluster = clusters[i]
        if assignment is not None:  # DNS endpoints and DestinationRule TLS: rare
            cluster.load_assignment.cluster_name = cluster.name
            cluster.load_assignment.endpoints.extend(assignment)
        if socket is not None:
            cluster.transport_socket.CopyFrom(socket)
    remember_all(push, clusters, pending.eds_names, pending.sds)
    return clusters


@dataclass(slots=True)
class _Pending:
    """Clusters as bytes, and what is set on them once parsed, in parallel lists: one object
    per cluster would be thousands more for the garbage collector to count and walk."""

    bodies: list[bytes] = field(default_factory=list)
    eds_names: list[str] = field(default_factory=list)  # "" for non-EDS clusters
    sds: list[frozenset[str] | None] = field(default_factory=list)
    # By position: (DNS endpoints, DestinationRule TLS socket), for the few that have them.
    extras: dict[
        int, tuple[list[ec_pb2.LocalityLbEndpoints] | None, base_pb2.TransportSocket | None]
    ] = field(default_factory=dict)


class _ServiceParts:
    """What a service's clusters share, worked out once per service: its `istio` metadata
    Struct, whether auto mTLS may reach it, its auto-mTLS contexts, and the template of
    the policy its previous cluster had (consecutive clusters mostly share one)."""

    __slots__ = (
        "_kind",
        "_last",
        "_metadata",
        "_push",
        "_sniff",
        "_struct",
        "contexts",
        "mtls_mode",
    )

    def __init__(
        self, push: PushContext, svc: Service, rule: BoundDestinationRule | None, sniff: bool
    ) -> None:
        self._push, self._sniff = push, sniff
        self._kind = _TYPE[svc.resolution]
        self._struct = _metadata_struct(push, svc, rule)
        self._metadata: dict[str, bytes] = {}  # by subset: the same on every port
        self.mtls_mode = service_mtls_mode(push, svc, None)
        self.contexts: dict[bool, bytes] = {}  # the auto-mTLS context, by HTTP/2
        # (protocol, policy, template) of the last cluster built.
        self._last: tuple[Protocol, TrafficPolicy | None, _Template] | None = None

    def metadata(self, subset: str) -> bytes:
        found = self._metadata.get(subset)
        if found is None:
            found = self._metadata[subset] = metadata_field(self._struct, subset)
        return found

    def template(self, protocol: Protocol, policy: TrafficPolicy | None) -> _Template:
        last = self._last
        if last is not None and last[0] is protocol and last[1] is policy:
            return last[2]
        found = _template(self._push, self._kind, protocol, self._sniff, policy)
        self._last = (protocol, policy, found)
        return found


def _encode(
    push: PushContext,
    svc: Service,
    port: ServicePort,
    subset: str,
    rule: BoundDestinationRule | None,
    subset_labels: Mapping[str, str] | None,
    parts: _ServiceParts,
    pending: _Pending,
) -> None:
    policy = push_traffic_policy(push, rule, port.port, subset) if rule is not None else None
    template = parts.template(port.protocol, policy)
    assignment = None
    if template.dns:
        assignment = locality_endpoints(push, svc, port.port, subset_labels)
        if not assignment:
            return  # Istio drops DNS clusters without endpoints
    name = outbound_cluster(port.port, subset, svc.hostname)
    identity = identity_fields(name, template.eds)
    tls = _tls(push, svc, port.port, subset, policy, template, parts)
    socket = None
    if isinstance(tls, bytes):
        body = b"".join((template.serialized, identity, parts.metadata(subset), tls))
    else:
        body = b"".join((template.serialized, identity, parts.metadata(subset)))
        socket = tls
    if assignment is not None or socket is not None:
        pending.extras[len(pending.bodies)] = (assignment, socket)
    # The template's bytes then the cluster's own (see encoded.py), joined once.
    pending.bodies.append(body)
    pending.eds_names.append(name if template.eds else "")
    pending.sds.append(_sds_names(policy, template, tls))


def _tls(
    push: PushContext,
    svc: Service,
    port: int,
    subset: str,
    policy: TrafficPolicy | None,
    template: _Template,
    parts: _ServiceParts,
) -> bytes | base_pb2.TransportSocket | None:
    """DestinationRule TLS (a transport socket), else automatic mTLS (serialized socket
    matches, from the service's `contexts`), else nothing: see mtls.py for the table."""
    tls = policy.tls if policy else None
    if tls is not None and tls.mode == "ISTIO_MUTUAL":
        sans = tls.subject_alt_names or push_trust_domains(push, svc.service_accounts)
        sni = tls.sni or sni_name(port, subset, svc.hostname)
        return istio_mutual_socket(push, sni, sans, template.http2)
    if tls is not None:
        return upstream_tls_socket(
            tls, sni_name(port, subset, svc.hostname), svc.service_accounts, template.http2
        )
    if template.original_dst or not _auto_mtls(push, parts.mtls_mode, policy):
        return None
    context = parts.contexts.get(template.http2)
    if context is None:
        accounts = push_trust_domains(push, svc.service_accounts)
        context = auto_mtls_context(push, accounts, template.http2)
        parts.contexts[template.http2] = context
    return auto_mtls_matches(context, sni_name(port, subset, svc.hostname))


def _auto_mtls(push: PushContext, mode: MtlsMode | None, policy: TrafficPolicy | None) -> bool:
    """uses_auto_mtls (no DestinationRule TLS here) from the service's mode without a
    policy (service_mtls_mode): only a PASSTHROUGH load balancer changes it."""
    if not push.mesh.enable_auto_mtls or mode is None or mode is MtlsMode.DISABLE:
        return False
    lb = policy.load_balancer if policy else None
    return lb is None or lb.simple != "PASSTHROUGH"


def _sds_names(
    policy: TrafficPolicy | None,
    template: _Template,
    tls: bytes | base_pb2.TransportSocket | None,
) -> frozenset[str] | None:
    """The SDS names the cluster refers to, None when not known here (the DR's own TLS
    context, or a template with TLS of its own)."""
    if not template.plain:
        return None
    if tls is None:
        return _NO_SDS
    if isinstance(tls, bytes):
        return MUTUAL_SDS_NAMES  # auto mTLS
    mode = policy.tls.mode if policy and policy.tls else ""
    return MUTUAL_SDS_NAMES if mode == "ISTIO_MUTUAL" else None


_NO_SDS: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class _Template:
    """Everything of a cluster but names, metadata and TLS, and what the builder reads of it."""

    cluster: cluster_pb2.Cluster
    serialized: bytes
    eds: bool
    dns: bool
    original_dst: bool
    http2: bool  # ALPN h2 (see _is_http2)
    plain: bool  # no transport socket of its own


def _template(
    push: PushContext,
    kind: cluster_pb2.Cluster.DiscoveryType,
    protocol: Protocol,
    sniff: bool,
    policy: TrafficPolicy | None,
) -> _Template:
    """Shared by clusters whose policies are equal: DestinationRules often repeat one policy
    (the policy's JSON, looked up once per policy object, is the key)."""
    templates = push.memo.setdefault(_TEMPLATES, {})
    assert isinstance(templates, dict)
    key = (kind, protocol, sniff, _policy_key(push, policy))
    found: _Template | None = templates.get(key)
    if found is not None:
        return found
    cluster = base_cluster("", kind, push.mesh.connect_timeout)
    if kind in _DNS_TYPES:
        _dns_settings(push, cluster)
    options = apply_traffic_policy(cluster, policy, protocol_options(protocol, sniff=sniff))
    apply_locality_cluster(cluster, push.mesh, policy)
    if cluster.type == cluster_pb2.Cluster.EDS:
        set_eds(cluster)
    attach_protocol_options(cluster, options)
    assert not cluster.HasField("metadata"), "metadata is merged per cluster"
    found = templates[key] = _Template(
        cluster,
        cluster.SerializeToString(),
        eds=cluster.type == cluster_pb2.Cluster.EDS,
        dns=cluster.type in _DNS_TYPES,
        original_dst=cluster.type == cluster_pb2.Cluster.ORIGINAL_DST,
        http2=_is_http2(protocol, cluster),
        plain=not cluster.HasField("transport_socket") and not cluster.transport_socket_matches,
    )
    return found


def _policy_key(push: PushContext, policy: TrafficPolicy | None) -> str | None:
    """The policy's content, memoised by identity (the entry keeps the policy alive, so the
    id stays unique for the push)."""
    if policy is None:
        return None
    memo = push.memo.setdefault(_POLICY_KEYS, {})
    assert isinstance(memo, dict)
    found = memo.get(id(policy))
    if found is None or found[0] is not policy:
        found = memo[id(policy)] = (policy, policy.model_dump_json())
    key: str = found[1]
    return key


_POLICY_KEYS = "clusters.policy_keys"


def _metadata_struct(push: PushContext, svc: Service, rule: BoundDestinationRule | None) -> bytes:
    """The serialized `istio` Struct of a service's clusters (services, DestinationRule
    provenance), without subset: the same for every proxy class, so once per push (one
    string key per service: no key tuples for the garbage collector)."""
    memo = push.memo.setdefault(_METADATA, {})
    assert isinstance(memo, dict)
    key = f"{svc.hostname}/{svc.namespace}/{rule.namespace + '/' + rule.obj.name if rule else ''}"
    found = memo.get(key)
    if found is None:
        found = memo[key] = istio_metadata_struct(
            [svc], (rule.namespace, rule.obj.name) if rule else None, external=svc.mesh_external
        )
    assert isinstance(found, bytes)
    return found


def _dns_settings(push: PushContext, cluster: cluster_pb2.Cluster) -> None:
    cluster.dns_lookup_family = cluster_pb2.Cluster.V4_ONLY
    cluster.respect_dns_ttl = True
    cluster.dns_refresh_rate.CopyFrom(duration(push.mesh.dns_refresh_rate))
    resolver = cares_dns_resolver_pb2.CaresDnsResolverConfig()
    resolver.udp_max_queries.value = _CARES_UDP_MAX_QUERIES
    cluster.typed_dns_resolver_config.name = "envoy.network.dns_resolver.cares"
    cluster.typed_dns_resolver_config.typed_config.CopyFrom(pack(resolver))


def _is_http2(protocol: Protocol, template: cluster_pb2.Cluster) -> bool:
    """ALPN h2 for HTTP2 ports and for clusters a DestinationRule upgraded to HTTP2."""
    if protocol.is_http2:
        return True
    packed = template.typed_extension_protocol_options.get(
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    )
    if packed is None:
        return False
    options = hpo_pb2.HttpProtocolOptions()
    packed.Unpack(options)
    return bool(options.explicit_http_config.HasField("http2_protocol_options"))
