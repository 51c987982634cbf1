"""A service port's endpoints as serialized LocalityLbEndpoints, built once per push.

EDS assignments are assembled from these bytes (endpoints.py): a subset's assignment
filters the port's groups, the port's own assignment takes them as they are. Each
LbEndpoint is the serialized part its workload's replicas share (health, weight, Istio's
metadata) followed by the replica's address; the per-push memos live on one `_Encoder`
so that the loop over thousands of endpoints reads attributes, not `push.memo` entries.
A port's groups are one flat `_PortGroups` (its endpoints in group order, and where each
group ends): what the memo keeps alive is a few objects per port, not several per locality.
"""

from __future__ import annotations

import operator
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
from meshpilot.xds.wire import field_number, length_delimited, tag, varint

__all__ = ["TLS_MATCH_KEY", "assignment_endpoints", "group_bytes"]

TLS_MATCH_KEY = "envoy.transport_socket_match"
_MEMO = "endpoints.encoder"


def group_bytes(
    push: PushContext, svc: Service, port: int, subset_labels: Mapping[str, str] | None
) -> list[bytes]:
    """Serialized LocalityLbEndpoints of a service port, filtered by subset labels."""
    groups = _encoder(push).groups(svc, port)
    if not subset_labels:
        return list(groups.serialized)
    out = []
    wanted = list(subset_labels.items())
    eps, start = groups.endpoints, 0
    for i, end in enumerate(groups.ends):
        if len(wanted) == 1:  # the usual subset (`version: v1`): no generator per endpoint
            k, v = wanted[0]
            members = [j for j in range(start, end) if eps[j].labels.get(k) == v]
        else:
            members = [
                j for j in range(start, end) if all(eps[j].labels.get(k) == v for k, v in wanted)
            ]
        if len(members) == end - start:
            out.append(groups.serialized[i])
        elif members:
            lbs = [groups.lb_endpoints[j] for j in members]
            weight = sum(eps[j].weight for j in members)
            out.append(_serialize_group(groups.localities[i], lbs, weight))
        start = end
    return out


def assignment_endpoints(
    push: PushContext, svc: Service, port: int, subset_labels: Mapping[str, str] | None
) -> bytes:
    """`group_bytes` as the `endpoints` fields of a ClusterLoadAssignment; without subset
    labels (a port's own assignment) framed once per push."""
    if subset_labels:
        return b"".join(
            _frame(_CLA_ENDPOINTS_TAG, g) for g in group_bytes(push, svc, port, subset_labels)
        )
    return _encoder(push).groups(svc, port).framed


@dataclass(slots=True)
class _PortGroups:
    """A service port's healthy endpoints by locality: group i is the endpoints (and
    serialized LbEndpoints) from `ends[i - 1]` (0 for the first) up to `ends[i]`."""

    endpoints: Sequence[Endpoint]  # in group order
    lb_endpoints: Sequence[bytes]  # serialized LbEndpoint per endpoint
    ends: Sequence[int]
    localities: Sequence[bytes]  # serialized envoy.config.core.v3.Locality, empty for none
    serialized: Sequence[bytes]  # each group's LocalityLbEndpoints
    framed: bytes  # all groups as ClusterLoadAssignment.endpoints fields


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
        "_ports",
        "_shared",
    )

    def __init__(
        self, index: PeerAuthnIndex, endpoints: Callable[[Service, int], Sequence[Endpoint]]
    ) -> None:
        self._peer_authn = index
        self._no_peer_authn = index.empty  # read per endpoint
        self._endpoints = endpoints
        self._groups: dict[tuple[str, str, int], _PortGroups] = {}
        self._localities: dict[tuple[str, str, str], bytes] = {}
        self._locality_names: dict[tuple[str, str, str], str] = {}  # str(Locality), for sorting
        self._shared: dict[tuple[str, str, int], bytes] = {}  # by (workload, tlsMode, weight)
        self._by_pod: dict[str, bytes] = {}  # _shared_part
        self._labels: list[Mapping[str, str]] = []  # keeps _by_pod's ids unique
        self._ports: dict[int, bytes] = {}  # SocketAddress.port_value fields

    def groups(self, svc: Service, port: int) -> _PortGroups:
        """A service port's healthy endpoints by locality, shared by the port's default
        assignment (as is) and its subsets (filtered)."""
        key = (svc.hostname, svc.namespace, port)
        found = self._groups.get(key)
        if found is not None:
            return found
        # Keyed by the locality's fields: a plain tuple hashes in C, the dataclass in Python.
        by_locality: dict[tuple[str, str, str], list[Endpoint]] = {}
        names = self._locality_names
        registered = self._endpoints(svc, port)
        for ep in registered:
            if ep.healthy:
                loc = ep.locality
                where = (loc.region, loc.zone, loc.subzone)
                members = by_locality.get(where)
                if members is None:
                    by_locality[where] = [ep]
                    if where not in names:
                        names[where] = str(loc)
                else:
                    members.append(ep)
        order = sorted(by_locality, key=names.__getitem__) if len(by_locality) > 1 else by_locality
        ordered: list[Endpoint] = []
        ends, localities = [], []
        for where in order:
            ordered += by_locality[where]
            ends.append(len(ordered))
            localities.append(self._locality(where, by_locality[where][0].locality))
        endpoints: Sequence[Endpoint] = ordered
        if len(ordered) == len(registered) and all(map(operator.is_, ordered, registered)):
            endpoints = registered  # already in group order: keep no list of our own
        # A tuple of bytes: the collector stops tracking it, a list it walks every time.
        lbs = tuple([self._lb_endpoint(ep) for ep in endpoints])
        serialized, start = [], 0
        for locality, end in zip(localities, ends, strict=True):
            weight = 0
            for ep in endpoints[start:end]:
                weight += ep.weight
            serialized.append(_serialize_group(locality, lbs[start:end], weight))
            start = end
        framed = b"".join([_frame(_CLA_ENDPOINTS_TAG, g) for g in serialized])
        found = self._groups[key] = _PortGroups(
            endpoints, lbs, tuple(ends), tuple(localities), tuple(serialized), framed
        )
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
        """A serialized LbEndpoint: the shared part, then this replica's address (its three
        enclosing headers from one table when the address is short, as addresses are)."""
        if self._no_peer_authn:
            # A pod serving several ports gets the shared part once: without
            # PeerAuthentications it depends on the pod's labels object, workload,
            # namespace, tlsMode and weight alone (a string key: no tuple per endpoint for
            # the garbage collector; the labels are kept, so their id stays unique).
            key = f"{id(ep.labels)}/{ep.workload_name}/{ep.namespace}/{ep.tls_mode}/{ep.weight}"
            prefix = self._by_pod.get(key)
            if prefix is None:
                prefix = self._by_pod[key] = self._shared_part_of(ep)
                self._labels.append(ep.labels)
        else:
            prefix = self._shared_part_of(ep)
        port = self._ports.get(ep.port)
        if port is None:
            port = self._ports[ep.port] = _PORT_TAG + varint(ep.port)
        address = ep.address.encode()
        if len(address) < 0x80:
            socket = _SOCKET_ADDRESS_TAG + _ONE_BYTE[len(address)] + address + port
            if len(socket) < len(_ADDRESS_HEADS):
                return prefix + _ADDRESS_HEADS[len(socket)] + socket
        socket = length_delimited(_SOCKET_ADDRESS, address) + port
        return prefix + length_delimited(
            _LB_ENDPOINT, length_delimited(_ENDPOINT_ADDRESS, length_delimited(_SOCKET, socket))
        )

    def _shared_part_of(self, ep: Endpoint) -> bytes:
        """Health, weight and Istio's metadata (`istio.workload`, tlsMode), serialized."""
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


def _frame(field_tag: bytes, payload: bytes) -> bytes:
    """wire.length_delimited with the tag already encoded (thousands per push)."""
    n = len(payload)
    return field_tag + (_ONE_BYTE[n] if n < 0x80 else varint(n)) + payload


def _serialize_group(locality: bytes, lbs: Sequence[bytes], weight: int) -> bytes:
    parts = [_frame(_GROUP_LOCALITY_TAG, locality)] if locality else []
    parts += [_frame(_GROUP_LB_ENDPOINTS_TAG, lb) for lb in lbs]
    parts.append(_frame(_GROUP_WEIGHT_TAG, _UINT32_VALUE + varint(weight)))
    return b"".join(parts)


_ONE_BYTE = tuple(varint(n) for n in range(0x80))
_CLA_ENDPOINTS_TAG = tag(field_number(endpoint_pb2.ClusterLoadAssignment.DESCRIPTOR, "endpoints"))
_GROUP_LOCALITY_TAG = tag(field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "locality"))
_GROUP_LB_ENDPOINTS_TAG = tag(field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "lb_endpoints"))
_GROUP_WEIGHT_TAG = tag(
    field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "load_balancing_weight")
)
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
_SOCKET_ADDRESS_TAG = tag(_SOCKET_ADDRESS)
# port_value is a varint field: tag = number << 3 | 0
_PORT_TAG = varint(field_number(address_pb2.SocketAddress.DESCRIPTOR, "port_value") << 3)


def _address_head(n: int) -> bytes:
    """The LbEndpoint.endpoint, Endpoint.address and Address.socket_address headers
    around a serialized SocketAddress of `n` bytes: what three length_delimited calls
    would write, as one precomputed piece (each tag is one byte)."""
    socket_head = tag(_SOCKET) + varint(n)
    address_head = tag(_ENDPOINT_ADDRESS) + varint(n + len(socket_head))
    inner = n + len(socket_head) + len(address_head)
    return tag(_LB_ENDPOINT) + varint(inner) + address_head + socket_head


# Up to the size where every header length still takes one byte.
_ADDRESS_HEADS = tuple(_address_head(n) for n in range(0x7C))
