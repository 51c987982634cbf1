"""Endpoints (EDS): ClusterLoadAssignments grouped by locality, with Istio's endpoint metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping

from envoy.config.core.v3 import address_pb2, base_pb2, health_check_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2
from envoy.config.endpoint.v3 import endpoint_pb2

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Endpoint, Locality, Service
from meshpilot.registry.workloads import workload_metadata
from meshpilot.xds.names import parse_cluster_name
from meshpilot.xds.protos import u32

__all__ = ["generate_endpoints", "locality_endpoints"]

TLS_MATCH_KEY = "envoy.transport_socket_match"


def generate_endpoints(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[endpoint_pb2.ClusterLoadAssignment]:
    """One assignment per requested outbound cluster name whose service uses EDS."""
    scope = push.proxy_scope(proxy)
    out = []
    for name in sorted(names or ()):
        parsed = parse_cluster_name(name)
        if parsed is None or parsed[0] != "outbound":
            continue
        _, port, subset, hostname = parsed
        svc = scope.service(hostname)
        if svc is None:
            continue
        labels = _subset_labels(push, proxy, svc, subset)
        if subset and labels is None:
            continue
        cla = endpoint_pb2.ClusterLoadAssignment(cluster_name=name)
        cla.endpoints.extend(locality_endpoints(push, svc, port, labels))
        out.append(cla)
    return out


def _subset_labels(
    push: PushContext, proxy: Proxy, svc: Service, subset: str
) -> Mapping[str, str] | None:
    if not subset:
        return None
    rule = push.destination_rule(proxy, svc)
    for s in rule.obj.model.spec.subsets if rule else ():
        if s.name == subset:
            return s.labels
    return None


def locality_endpoints(
    push: PushContext, svc: Service, port: int, subset_labels: Mapping[str, str] | None
) -> list[ec_pb2.LocalityLbEndpoints]:
    """Healthy endpoints of one service port (filtered by subset labels), by locality."""
    groups: dict[Locality, list[Endpoint]] = defaultdict(list)
    for ep in push.endpoints(svc, port):
        if not ep.healthy:
            continue
        if subset_labels and not all(ep.labels.get(k) == v for k, v in subset_labels.items()):
            continue
        groups[ep.locality].append(ep)
    out = []
    for locality in sorted(groups, key=str):
        eps = groups[locality]
        group = ec_pb2.LocalityLbEndpoints(
            lb_endpoints=[_lb_endpoint(ep) for ep in eps],
            load_balancing_weight=u32(sum(ep.weight for ep in eps)),
        )
        if str(locality):
            group.locality.region = locality.region
            group.locality.zone = locality.zone
            group.locality.sub_zone = locality.subzone
        out.append(group)
    return out


def _lb_endpoint(ep: Endpoint) -> ec_pb2.LbEndpoint:
    lb = ec_pb2.LbEndpoint(
        endpoint=ec_pb2.Endpoint(
            address=address_pb2.Address(
                socket_address=address_pb2.SocketAddress(address=ep.address, port_value=ep.port)
            )
        ),
        health_status=health_check_pb2.HEALTHY,
        load_balancing_weight=u32(ep.weight),
    )
    metadata = base_pb2.Metadata()
    if ep.workload_name:
        metadata.filter_metadata["istio"]["workload"] = workload_metadata(
            ep.workload_name, ep.namespace, ep.labels
        )
    if ep.tls_mode and ep.tls_mode != "disabled":
        metadata.filter_metadata[TLS_MATCH_KEY]["tlsMode"] = ep.tls_mode
    if metadata.filter_metadata:
        lb.metadata.CopyFrom(metadata)
    return lb
