"""A cluster and its endpoints in a user's words: subset, load balancer, pool limits,
outlier detection, the upstream TLS (Istio mTLS with its SAN, TLS origination, or plain)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2, health_check_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from google.protobuf import struct_pb2

__all__ = ["ClusterView", "EndpointView", "view_cluster"]

_MAX = 4294967295


@dataclass(frozen=True, slots=True)
class EndpointView:
    address: str
    port: int
    pod: str  # POD.NAMESPACE, or "" when no input pod has the address
    locality: str
    health: str
    mtls: bool  # Istio mTLS to this endpoint (tlsMode istio and the cluster offers it)


@dataclass(frozen=True, slots=True)
class ClusterView:
    details: tuple[str, ...]
    endpoints: tuple[EndpointView, ...]
    config: str  # the `istio.config` provenance (a DestinationRule), or ""
    subset: str
    service: tuple[str, str] | None  # (hostname, namespace) the cluster is for
    kind: str  # EDS, STRICT_DNS, ORIGINAL_DST, STATIC...
    sni: str = ""  # the SNI of the cluster's upstream TLS ("" for plaintext)


def _meta(md: base_pb2.Metadata, key: str) -> Mapping[str, struct_pb2.Value]:
    return md.filter_metadata[key].fields if key in md.filter_metadata else {}


def view_cluster(
    cluster: cluster_pb2.Cluster,
    cla: endpoint_pb2.ClusterLoadAssignment | None,
    pods_by_ip: Mapping[str, str],
) -> ClusterView:
    istio = _meta(cluster.metadata, "istio")
    details = [f"discovery {cluster_pb2.Cluster.DiscoveryType.Name(cluster.type)}"]
    subset = istio["subset"].string_value if "subset" in istio else ""
    if subset:
        details.append(f"subset {subset}")
    details.append(f"load balancer {cluster_pb2.Cluster.LbPolicy.Name(cluster.lb_policy)}")
    details.extend(_pool(cluster))
    if cluster.HasField("outlier_detection"):
        od = cluster.outlier_detection
        details.append(
            f"outlier detection: eject after {od.consecutive_5xx.value or 5} consecutive 5xx, "
            f"max {od.max_ejection_percent.value or 10}% ejected"
        )
    offers_mtls, tls_lines = _tls(cluster)
    details.extend(tls_lines)
    service = None
    if "services" in istio and istio["services"].list_value.values:
        s = istio["services"].list_value.values[0].struct_value.fields
        service = (s["host"].string_value, s["namespace"].string_value)
    endpoints = _endpoints(cluster, cla, pods_by_ip, offers_mtls)
    return ClusterView(
        tuple(details),
        endpoints,
        istio["config"].string_value if "config" in istio else "",
        subset,
        service,
        cluster_pb2.Cluster.DiscoveryType.Name(cluster.type),
        _sni(cluster),
    )


def _pool(cluster: cluster_pb2.Cluster) -> list[str]:
    out: list[str] = []
    for t in cluster.circuit_breakers.thresholds:
        limits = [
            (name, getattr(t, name).value)
            for name in ("max_connections", "max_pending_requests", "max_requests", "max_retries")
            if t.HasField(name) and getattr(t, name).value != _MAX
        ]
        if limits:
            out.append("connection pool: " + ", ".join(f"{n} {v}" for n, v in limits))
    return out


def _tls(cluster: cluster_pb2.Cluster) -> tuple[bool, list[str]]:
    """Whether endpoints labelled tlsMode=istio get Istio mTLS, and the TLS lines."""
    for match in cluster.transport_socket_matches:
        if match.name == "tlsMode-istio":
            return True, [
                f"TLS: ISTIO_MUTUAL to tlsMode=istio endpoints, {_tls_text(match.transport_socket)}"
            ]
    if cluster.HasField("transport_socket") and cluster.transport_socket.name.endswith("tls"):
        text = _tls_text(cluster.transport_socket)
        # Istio mTLS to every endpoint (DestinationRule ISTIO_MUTUAL) when it presents the
        # workload certificate.
        return text.startswith("mutual"), [f"TLS: {text}"]
    return False, ["TLS: none (plaintext)"]


def _sni(cluster: cluster_pb2.Cluster) -> str:
    sockets = [m.transport_socket for m in cluster.transport_socket_matches]
    for socket in [*sockets, cluster.transport_socket]:
        if str(socket.name).endswith("tls"):
            ctx = tls_pb2.UpstreamTlsContext()
            socket.typed_config.Unpack(ctx)
            return str(ctx.sni)
    return ""


def _tls_text(socket: base_pb2.TransportSocket) -> str:
    ctx = tls_pb2.UpstreamTlsContext()
    socket.typed_config.Unpack(ctx)
    common = ctx.common_tls_context
    validation = common.combined_validation_context.default_validation_context
    sans = [m.matcher.exact for m in validation.match_typed_subject_alt_names]
    mutual = any(c.name == "default" for c in common.tls_certificate_sds_secret_configs)
    kind = "mutual, workload certificate" if mutual else "originated (SIMPLE)"
    san = f", SAN {', '.join(sans)}" if sans else ""
    return f"{kind}, SNI {ctx.sni or '(none)'}{san}"


def _endpoints(
    cluster: cluster_pb2.Cluster,
    cla: endpoint_pb2.ClusterLoadAssignment | None,
    pods_by_ip: Mapping[str, str],
    offers_mtls: bool,
) -> tuple[EndpointView, ...]:
    source = cla if cla is not None else cluster.load_assignment
    out: list[EndpointView] = []
    for group in source.endpoints:
        loc = group.locality
        locality = "/".join(p for p in (loc.region, loc.zone, loc.sub_zone) if p)
        for lb in group.lb_endpoints:
            sock = lb.endpoint.address.socket_address
            tls = _meta(lb.metadata, "envoy.transport_socket_match")
            by_label = "tlsMode" in tls and tls["tlsMode"].string_value == "istio"
            mtls = offers_mtls and (by_label or not cluster.transport_socket_matches)
            health = health_check_pb2.HealthStatus.Name(lb.health_status)
            out.append(
                EndpointView(
                    sock.address,
                    sock.port_value,
                    pods_by_ip.get(sock.address, ""),
                    locality,
                    health,
                    mtls,
                )
            )
    return tuple(out)
