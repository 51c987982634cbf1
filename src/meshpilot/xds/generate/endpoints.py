"""Endpoints (EDS): ClusterLoadAssignments grouped by locality, with Istio's endpoint metadata."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from envoy.config.core.v3 import address_pb2, base_pb2, health_check_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2
from envoy.config.endpoint.v3 import endpoint_pb2

from meshpilot.config.istio.peer_authentication import MtlsMode
from meshpilot.model.indexes.authn import peer_authn
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import SidecarScope
from meshpilot.registry.model import Endpoint, Locality, Service
from meshpilot.registry.workloads import workload_metadata
from meshpilot.xds.names import parse_cluster_name
from meshpilot.xds.wire import field_number, length_delimited, varint

if TYPE_CHECKING:
    from meshpilot.xds.generate.endpoint_locality import LocalityPlan

__all__ = ["generate_endpoints", "locality_endpoints"]

TLS_MATCH_KEY = "envoy.transport_socket_match"


def generate_endpoints(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[endpoint_pb2.ClusterLoadAssignment]:
    """One assignment per requested outbound cluster name whose service uses EDS. Proxies of
    one class share the assignments (built once per push)."""
    # Imported here: endpoint_locality -> clusters -> clusters.outbound -> this module.
    from meshpilot.xds.generate.endpoint_locality import locality_plan, localize

    proxy_class = push.proxy_class(proxy)
    # The shared assignments and which of them locality LB rewrites depend on the class
    # alone: a second proxy of the class only redoes the rewritten ones for its locality.
    plan_key = ("eds.plan", proxy_class, frozenset(names or ()))
    plan = cast(_Plan | None, push.memo.get(plan_key))
    if plan is None:
        memo = push.memo.setdefault(("eds", proxy_class), {})
        assert isinstance(memo, dict)
        scope = push.proxy_scope(proxy)
        shared: list[endpoint_pb2.ClusterLoadAssignment] = []
        for name in sorted(names or ()):
            cla = memo.get(name)
            if cla is None:
                cla = memo[name] = _assignment(push, proxy, scope, name)
            if cla is not _NONE:
                shared.append(cla)
        localized = [
            (i, lp) for i, cla in enumerate(shared) if (lp := locality_plan(push, proxy, cla))
        ]
        plan = push.memo[plan_key] = (tuple(shared), tuple(localized))
    shared_clas, localized_plans = plan
    out = list(shared_clas)
    for i, lp in localized_plans:
        out[i] = localize(push, proxy, out[i], lp)
    return out


# The class's assignments in name order, and (index, plan) of those locality LB rewrites.
_Plan = tuple[
    tuple[endpoint_pb2.ClusterLoadAssignment, ...], tuple[tuple[int, "LocalityPlan"], ...]
]
_NONE = endpoint_pb2.ClusterLoadAssignment()  # marks names with no assignment


def _assignment(
    push: PushContext, proxy: Proxy, scope: SidecarScope, name: str
) -> endpoint_pb2.ClusterLoadAssignment:
    parsed = parse_cluster_name(name)
    if parsed is None or parsed[0] != "outbound":
        return _NONE
    _, port, subset, hostname = parsed
    svc = scope.service(hostname)
    if svc is None:
        return _NONE
    labels = _subset_labels(push, proxy, svc, subset)
    if subset and labels is None:
        return _NONE
    # Assembled from the cached serialized groups and parsed once: no per-message copies.
    parts = [length_delimited(_CLA_NAME, name.encode())]
    parts.extend(length_delimited(_CLA_ENDPOINTS, g) for g in _group_bytes(push, svc, port, labels))
    return endpoint_pb2.ClusterLoadAssignment.FromString(b"".join(parts))


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
    return [
        ec_pb2.LocalityLbEndpoints.FromString(g)
        for g in _group_bytes(push, svc, port, subset_labels)
    ]


def _group_bytes(
    push: PushContext, svc: Service, port: int, subset_labels: Mapping[str, str] | None
) -> list[bytes]:
    """Serialized LocalityLbEndpoints of a service port, filtered by subset labels."""
    groups = _groups(push, svc, port)
    if not subset_labels:
        return [g.serialized for g in groups]
    out = []
    for g in groups:
        members = [
            i
            for i, ep in enumerate(g.endpoints)
            if all(ep.labels.get(k) == v for k, v in subset_labels.items())
        ]
        if len(members) == len(g.endpoints):
            out.append(g.serialized)
        elif members:
            out.append(
                _serialize_group(
                    g.locality,
                    [g.endpoints[i] for i in members],
                    [g.lb_endpoints[i] for i in members],
                )
            )
    return out


@dataclass(frozen=True, slots=True)
class _Group:
    """One locality's endpoints of a service port, serialized each and all together."""

    endpoints: tuple[Endpoint, ...]
    locality: bytes  # serialized envoy.config.core.v3.Locality, empty for none
    lb_endpoints: tuple[bytes, ...]  # serialized LbEndpoint per endpoint
    serialized: bytes  # the LocalityLbEndpoints of all of them


_GROUPS = "endpoints.groups"
_METADATA = "endpoints.metadata"
_CLA_NAME = field_number(endpoint_pb2.ClusterLoadAssignment.DESCRIPTOR, "cluster_name")
_CLA_ENDPOINTS = field_number(endpoint_pb2.ClusterLoadAssignment.DESCRIPTOR, "endpoints")
_GROUP_LOCALITY = field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "locality")
_GROUP_LB_ENDPOINTS = field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "lb_endpoints")
_GROUP_WEIGHT = field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "load_balancing_weight")
_UINT32_VALUE = b"\x08"  # google.protobuf.UInt32Value.value: field 1, varint


def _groups(push: PushContext, svc: Service, port: int) -> list[_Group]:
    """A service port's healthy endpoints by locality, built once per push and shared by the
    port's default assignment (as is) and its subsets (filtered)."""
    memo = push.memo.setdefault(_GROUPS, {})
    assert isinstance(memo, dict)
    key = (svc.hostname, svc.namespace, port)
    found = memo.get(key)
    if found is None:
        by_locality: dict[Locality, list[Endpoint]] = defaultdict(list)
        for ep in push.endpoints(svc, port):
            if ep.healthy:
                by_locality[ep.locality].append(ep)
        found = memo[key] = []
        for locality in sorted(by_locality, key=str):
            eps = by_locality[locality]
            loc = _locality_bytes(push, locality)
            lbs = [_lb_endpoint_bytes(push, ep) for ep in eps]
            found.append(_Group(tuple(eps), loc, tuple(lbs), _serialize_group(loc, eps, lbs)))
    return found


def _serialize_group(locality: bytes, eps: Sequence[Endpoint], lbs: Sequence[bytes]) -> bytes:
    parts = [length_delimited(_GROUP_LOCALITY, locality)] if locality else []
    parts.extend(length_delimited(_GROUP_LB_ENDPOINTS, lb) for lb in lbs)
    weight = sum(ep.weight for ep in eps)
    parts.append(length_delimited(_GROUP_WEIGHT, _UINT32_VALUE + varint(weight)))
    return b"".join(parts)


def _locality_bytes(push: PushContext, locality: Locality) -> bytes:
    memo = push.memo.setdefault(_LOCALITIES, {})
    assert isinstance(memo, dict)
    found = memo.get(locality)
    if found is None:
        found = memo[locality] = (
            base_pb2.Locality(
                region=locality.region, zone=locality.zone, sub_zone=locality.subzone
            ).SerializeToString()
            if str(locality)
            else b""
        )
    return found


def _lb_endpoint_bytes(push: PushContext, ep: Endpoint) -> bytes:
    """A serialized LbEndpoint: the shared part of a workload's replicas (health, weight,
    metadata) serialized once, followed by this replica's address."""
    metadata = _metadata(push, ep)
    templates = push.memo.setdefault(_LB_TEMPLATES, {})
    assert isinstance(templates, dict)
    key = (id(metadata), ep.weight)
    prefix: bytes | None = templates.get(key)
    if prefix is None:
        template = ec_pb2.LbEndpoint(health_status=health_check_pb2.HEALTHY)
        template.load_balancing_weight.value = ep.weight
        if metadata is not None:
            template.metadata.CopyFrom(metadata)
        prefix = templates[key] = template.SerializeToString()
    socket = length_delimited(_SOCKET_ADDRESS, ep.address.encode()) + _PORT_TAG + varint(ep.port)
    address = length_delimited(_ADDRESS_SOCKET, socket)
    return prefix + length_delimited(_LB_ENDPOINT, length_delimited(_ENDPOINT_ADDRESS, address))


_LOCALITIES = "endpoints.localities"
_LB_ENDPOINT = field_number(ec_pb2.LbEndpoint.DESCRIPTOR, "endpoint")
_ENDPOINT_ADDRESS = field_number(ec_pb2.Endpoint.DESCRIPTOR, "address")
_ADDRESS_SOCKET = field_number(address_pb2.Address.DESCRIPTOR, "socket_address")
_SOCKET_ADDRESS = field_number(address_pb2.SocketAddress.DESCRIPTOR, "address")
# port_value is a varint field: tag = number << 3 | 0
_PORT_TAG = varint(field_number(address_pb2.SocketAddress.DESCRIPTOR, "port_value") << 3)
_LB_TEMPLATES = "endpoints.lb_templates"


def _metadata(push: PushContext, ep: Endpoint) -> base_pb2.Metadata | None:
    """Istio's endpoint metadata (`istio.workload`, tlsMode); replicas of a workload share it."""
    workload = (
        workload_metadata(ep.workload_name, ep.namespace, ep.labels) if ep.workload_name else ""
    )
    tls_mode = ep.tls_mode if ep.tls_mode != "disabled" else ""
    if tls_mode and _mtls_disabled(push, ep):
        tls_mode = ""  # auto-mTLS must send plaintext to it (Istio's mtlsChecker)
    if not workload and not tls_mode:
        return None
    memo = push.memo.setdefault(_METADATA, {})
    assert isinstance(memo, dict)
    found = memo.get((workload, tls_mode))
    if found is None:
        found = base_pb2.Metadata()
        if workload:
            found.filter_metadata["istio"]["workload"] = workload
        if tls_mode:
            found.filter_metadata[TLS_MATCH_KEY]["tlsMode"] = tls_mode
        memo[(workload, tls_mode)] = found
    return found


def _mtls_disabled(push: PushContext, ep: Endpoint) -> bool:
    """The workload's PeerAuthentication disables mTLS on this port."""
    index = peer_authn(push)
    if index.empty:
        return False
    mode = index.for_workload(ep.namespace, ep.labels).for_port(ep.port)
    return mode is MtlsMode.DISABLE
