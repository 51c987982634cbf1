"""A service port's endpoints as serialized LocalityLbEndpoints, built once per push.

EDS assignments are assembled from these bytes (endpoints.py): a subset's assignment
filters the port's groups, the port's own assignment takes them as they are. Each
LbEndpoint is the serialized part its workload's replicas share (health, weight, Istio's
metadata) followed by the replica's address; the per-push memos live on one `_Encoder`
so that the loop over thousands of endpoints reads attributes, not `push.memo` entries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from envoy.config.core.v3 import address_pb2, base_pb2, health_check_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2
from envoy.config.endpoint.v3 import endpoint_pb2

from meshpilot.config.istio.peer_authentication import MtlsMode
from meshpilot.model.indexes.authn import PeerAuthnIndex, peer_authn
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Endpoint, Locality, Service
from meshpilot.registry.workloads import workload_metadata
from meshpilot.xds.generate.struct_bytes import metadata, string_value, struct
from meshpilot.xds.wire import field_number, length_delimited, varint

__all__ = ["TLS_MATCH_KEY", "assignment_endpoints", "group_bytes"]

TLS_MATCH_KEY = "envoy.transport_socket_match"
_MEMO = "endpoints.encoder"


def group_bytes(
    push: PushContext, svc: Service, port: int, subset_labels: Mapping[str, str] | None
) -> list[bytes]:
    """Serialized LocalityLbEndpoints of a service port, filtered by subset labels."""
    groups = _encoder(push).groups(svc, port)
    if not subset_labels:
        return [g.serialized for g in groups]
    out = []
    wanted = list(subset_labels.items())
    for g in groups:
        if len(wanted) == 1:  # the usual subset (`version: v1`): no generator per endpoint
            k, v = wanted[0]
            members = [i for i, ep in enumerate(g.endpoints) if ep.labels.get(k) == v]
        else:
            members = [
                i
                for i, ep in enumerate(g.endpoints)
                if all(ep.labels.get(k) == v for k, v in wanted)
            ]
        if len(members) == len(g.endpoints):
            out.append(g.serialized)
        elif members:
            eps = [g.endpoints[i] for i in members]
            out.append(_serialize_group(g.locality, eps, [g.lb_endpoints[i] for i in members]))
    return out


def assignment_endpoints(
    push: PushContext, svc: Service, port: int, subset_labels: Mapping[str, str] | None
) -> bytes:
    """`group_bytes` as the `endpoints` fields of a ClusterLoadAssignment; without subset
    labels (a port's own assignment) framed once per push."""
    if subset_labels:
        return b"".join(
            length_delimited(_CLA_ENDPOINTS, g) for g in group_bytes(push, svc, port, subset_labels)
        )
    encoder = _encoder(push)
    key = (svc.hostname, svc.namespace, port)
    found = encoder.framed.get(key)
    if found is None:
        found = encoder.framed[key] = b"".join(
            length_delimited(_CLA_ENDPOINTS, g) for g in group_bytes(push, svc, port, None)
        )
    return found


@dataclass(slots=True)
class _Group:
    """One locality's endpoints of a service port, serialized each and all together."""

    # The lists the encoder built, kept as they are (never changed): copies into tuples
    # were thousands more objects per push.
    endpoints: Sequence[Endpoint]
    locality: bytes  # serialized envoy.config.core.v3.Locality, empty for none
    lb_endpoints: Sequence[bytes]  # serialized LbEndpoint per endpoint
    serialized: bytes  # the LocalityLbEndpoints of all of them


def _encoder(push: PushContext) -> _Encoder:
    found = push.memo.get(_MEMO)
    if found is None:
        # The registry's own lookup, not the push's: the push holds the encoder in its memo.
        found = push.memo[_MEMO] = _Encoder(peer_authn(push), push.registry.endpoints_of)
    assert isinstance(found, _Encoder)
    return found


class _Encoder:
    """One push's encoded groups and the parts they share."""

    __slots__ = (
        "_by_pod",
        "_endpoints",
        "_groups",
        "_labels",
        "_localities",
        "_locality_names",
        "_no_peer_authn",
        "_peer_authn",
        "_shared",
        "framed",
    )

    def __init__(
        self, index: PeerAuthnIndex, endpoints: Callable[[Service, int], Sequence[Endpoint]]
    ) -> None:
        self._peer_authn = index
        self._no_peer_authn = index.empty  # read per endpoint
        self._endpoints = endpoints
        self.framed: dict[tuple[str, str, int], bytes] = {}  # assignment_endpoints
        self._groups: dict[tuple[str, str, int], list[_Group]] = {}
        self._localities: dict[tuple[str, str, str], bytes] = {}
        self._locality_names: dict[tuple[str, str, str], str] = {}  # str(Locality), for sorting
        self._shared: dict[tuple[str, str, int], bytes] = {}  # by (workload, tlsMode, weight)
        self._by_pod: dict[str, bytes] = {}  # _shared_part
        self._labels: list[Mapping[str, str]] = []  # keeps _by_pod's ids unique

    def groups(self, svc: Service, port: int) -> list[_Group]:
        """A service port's healthy endpoints by locality, shared by the port's default
        assignment (as is) and its subsets (filtered)."""
        key = (svc.hostname, svc.namespace, port)
        found = self._groups.get(key)
        if found is not None:
            return found
        # Keyed by the locality's fields: a plain tuple hashes in C, the dataclass in Python.
        by_locality: dict[tuple[str, str, str], list[Endpoint]] = {}
        for ep in self._endpoints(svc, port):
            if ep.healthy:
                loc = ep.locality
                where = (loc.region, loc.zone, loc.subzone)
                members = by_locality.get(where)
                if members is None:
                    by_locality[where] = [ep]
                else:
                    members.append(ep)
        found = self._groups[key] = []
        names = self._locality_names
        for where, eps in sorted(
            by_locality.items(),
            key=lambda kv: names.get(kv[0]) or names.setdefault(kv[0], str(kv[1][0].locality)),
        ):
            encoded = self._locality(where, eps[0].locality)
            lbs = [self._lb_endpoint(ep) for ep in eps]
            found.append(_Group(eps, encoded, lbs, _serialize_group(encoded, eps, lbs)))
        return found

    def _locality(self, where: tuple[str, str, str], locality: Locality) -> bytes:
        found = self._localities.get(where)
        if found is None:
            found = self._localities[where] = (
                base_pb2.Locality(
                    region=locality.region, zone=locality.zone, sub_zone=locality.subzone
                ).SerializeToString()
                if any(where)
                else b""
            )
        return found

    def _lb_endpoint(self, ep: Endpoint) -> bytes:
        """A serialized LbEndpoint: the shared part, then this replica's address."""
        prefix = self._shared_part(ep)
        socket = (
            length_delimited(_SOCKET_ADDRESS, ep.address.encode()) + _PORT_TAG + varint(ep.port)
        )
        return prefix + length_delimited(
            _LB_ENDPOINT, length_delimited(_ENDPOINT_ADDRESS, length_delimited(_SOCKET, socket))
        )

    def _shared_part(self, ep: Endpoint) -> bytes:
        """Health, weight and Istio's metadata (`istio.workload`, tlsMode), serialized. A
        pod serving several ports gets it once: without PeerAuthentications it depends on
        the pod's labels object, workload, namespace, tlsMode and weight alone (a string key:
        no tuple per endpoint for the garbage collector; the labels are kept, so their id
        stays unique)."""
        if not self._no_peer_authn:
            return self._shared_part_of(ep)
        key = f"{id(ep.labels)}/{ep.workload_name}/{ep.namespace}/{ep.tls_mode}/{ep.weight}"
        found = self._by_pod.get(key)
        if found is None:
            found = self._by_pod[key] = self._shared_part_of(ep)
            self._labels.append(ep.labels)
        return found

    def _shared_part_of(self, ep: Endpoint) -> bytes:
        workload = (
            workload_metadata(ep.workload_name, ep.namespace, ep.labels) if ep.workload_name else ""
        )
        tls_mode = ep.tls_mode if ep.tls_mode != "disabled" else ""
        if tls_mode and self._mtls_disabled(ep):
            tls_mode = ""  # auto-mTLS must send plaintext to it (Istio's mtlsChecker)
        key = (workload, tls_mode, ep.weight)
        found = self._shared.get(key)
        if found is None:
            # Metadata entries concatenate: the tlsMode one is the same for most workloads.
            md = _tls_mode_entry(tls_mode) if tls_mode else b""
            if workload:
                md = metadata([("istio", struct([("workload", string_value(workload))]))]) + md
            found = _HEALTHY + length_delimited(
                _LB_WEIGHT, _UINT32_VALUE + varint(ep.weight) if ep.weight else b""
            )
            if md:
                found += length_delimited(_LB_METADATA, md)
            self._shared[key] = found
        return found

    def _mtls_disabled(self, ep: Endpoint) -> bool:
        """The workload's PeerAuthentication disables mTLS on this port."""
        if self._no_peer_authn:
            return False
        index = self._peer_authn
        return index.for_workload(ep.namespace, ep.labels).for_port(ep.port) is MtlsMode.DISABLE


@lru_cache(maxsize=8)
def _tls_mode_entry(tls_mode: str) -> bytes:
    """The `envoy.transport_socket_match` entry of endpoint metadata (tlsMode)."""
    return metadata([(TLS_MATCH_KEY, struct([("tlsMode", string_value(tls_mode))]))])


def _serialize_group(locality: bytes, eps: Sequence[Endpoint], lbs: Sequence[bytes]) -> bytes:
    parts = [length_delimited(_GROUP_LOCALITY, locality)] if locality else []
    parts.extend(length_delimited(_GROUP_LB_ENDPOINTS, lb) for lb in lbs)
    weight = sum(ep.weight for ep in eps)
    parts.append(length_delimited(_GROUP_WEIGHT, _UINT32_VALUE + varint(weight)))
    return b"".join(parts)


_CLA_ENDPOINTS = field_number(endpoint_pb2.ClusterLoadAssignment.DESCRIPTOR, "endpoints")
_GROUP_LOCALITY = field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "locality")
_GROUP_LB_ENDPOINTS = field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "lb_endpoints")
_GROUP_WEIGHT = field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "load_balancing_weight")
_UINT32_VALUE = b"\x08"  # google.protobuf.UInt32Value.value: field 1, varint
_LB_ENDPOINT = field_number(ec_pb2.LbEndpoint.DESCRIPTOR, "endpoint")
_LB_METADATA = field_number(ec_pb2.LbEndpoint.DESCRIPTOR, "metadata")
_LB_WEIGHT = field_number(ec_pb2.LbEndpoint.DESCRIPTOR, "load_balancing_weight")
# health_status = HEALTHY: a varint field, so spelled out (tag, value).
_HEALTHY = bytes(
    [field_number(ec_pb2.LbEndpoint.DESCRIPTOR, "health_status") << 3, health_check_pb2.HEALTHY]
)
_ENDPOINT_ADDRESS = field_number(ec_pb2.Endpoint.DESCRIPTOR, "address")
_SOCKET = field_number(address_pb2.Address.DESCRIPTOR, "socket_address")
_SOCKET_ADDRESS = field_number(address_pb2.SocketAddress.DESCRIPTOR, "address")
# port_value is a varint field: tag = number << 3 | 0
_PORT_TAG = varint(field_number(address_pb2.SocketAddress.DESCRIPTOR, "port_value") << 3)
