"""A service port's endpoints as serialized LocalityLbEndpoints, built once per push.

EDS assignments are assembled from these bytes (endpoints.py): a subset's assignment
filters the port's groups, the port's own assignment takes them as they are. Everything is
kept already framed for the message that holds it (each LbEndpoint as a
`LocalityLbEndpoints.lb_endpoints` field, each group as a `ClusterLoadAssignment.endpoints`
field), so assembling an assignment joins bytes and frames nothing. Each LbEndpoint is the
serialized part its workload's replicas share (health, weight, Istio's metadata) followed by
the replica's address. A port's groups are one flat `_PortGroups` (its endpoints in group
order, and where each group ends): a few objects per port, not several per locality.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from envoy.config.core.v3 import base_pb2

from meshpilot.config.istio.peer_authentication import MtlsMode
from meshpilot.model.indexes.authn import PeerAuthnIndex, peer_authn
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Endpoint, Locality, Service
from meshpilot.registry.workloads import workload_metadata
from meshpilot.xds.generate.endpoint_wire import (
    ADDRESS_HEADS,
    GROUP_LOCALITY_TAG,
    LB_ENDPOINTS_TAG,
    ONE_BYTE,
    PORT_TAG,
    SOCKET_ADDRESS_TAG,
    TLS_MATCH_KEY,
    framed_group,
    lb_endpoint_address,
    shared_part,
    unframe,
)
from meshpilot.xds.wire import varint

__all__ = ["TLS_MATCH_KEY", "assignment_endpoints", "group_bytes"]

_MEMO = "endpoints.encoder"
_ADDRESS_HEADS_LEN = len(ADDRESS_HEADS)


def group_bytes(
    push: PushContext, svc: Service, port: int, subset_labels: Mapping[str, str] | None
) -> list[bytes]:
    """Serialized LocalityLbEndpoints of a service port, filtered by subset labels."""
    groups = _encoder(push).groups(svc, port)
    framed = groups.framed if not subset_labels else subset_groups(groups, subset_labels)
    return [unframe(g) for g in framed]


def assignment_endpoints(
    push: PushContext, svc: Service, port: int, subset_labels: Mapping[str, str] | None
) -> bytes:
    """`group_bytes` as the `endpoints` fields of a ClusterLoadAssignment."""
    return port_endpoints(_encoder(push).groups(svc, port), subset_labels)


def port_endpoints(groups: _PortGroups, subset_labels: Mapping[str, str] | None) -> bytes:
    """A port's groups (filtered by subset labels) as ClusterLoadAssignment.endpoints."""
    if not subset_labels:
        return groups.all_framed
    return b"".join(subset_groups(groups, subset_labels))


def subset_groups(groups: _PortGroups, subset_labels: Mapping[str, str]) -> Sequence[bytes]:
    """The framed groups of the endpoints carrying `subset_labels`: a group whose every
    endpoint matches is taken as it is, a group partly matching is framed anew."""
    eps = groups.endpoints
    wanted = list(subset_labels.items())
    if len(wanted) == 1:  # the usual subset (`version: v1`): no generator per endpoint
        k, v = wanted[0]
        picked = [ep.labels.get(k) == v for ep in eps]
    else:
        picked = [all(ep.labels.get(k) == v for k, v in wanted) for ep in eps]
    if all(picked):
        return groups.framed
    if len(groups.framed) == len(eps):  # one endpoint per group (usual): the picked groups
        return [framed for framed, keep in zip(groups.framed, picked, strict=True) if keep]
    out = []
    start = 0
    for i, end in enumerate(groups.ends):
        if end - start == 1:  # one endpoint in the locality: in or out
            if picked[start]:
                out.append(groups.framed[i])
        else:
            members = [j for j in range(start, end) if picked[j]]
            if len(members) == end - start:
                out.append(groups.framed[i])
            elif members:
                weight = 0
                for j in members:
                    weight += eps[j].weight
                lbs = [groups.lb_endpoints[j] for j in members]
                out.append(framed_group(groups.localities[i], lbs, weight))
        start = end
    return out


@dataclass(slots=True)
class _PortGroups:
    """A service port's healthy endpoints by locality: group i is the endpoints (and
    LbEndpoints) from `ends[i - 1]` (0 for the first) up to `ends[i]`."""

    endpoints: Sequence[Endpoint]  # in group order
    lb_endpoints: Sequence[bytes]  # LbEndpoint per endpoint, as a lb_endpoints field
    ends: Sequence[int]
    localities: Sequence[bytes]  # LocalityLbEndpoints.locality fields, empty for none
    framed: Sequence[bytes]  # each group as a ClusterLoadAssignment.endpoints field
    all_framed: bytes  # all of them


def _encoder(push: PushContext) -> _Encoder:
    found = push.memo.get(_MEMO)
    if found is None:
        # The registry's own lookup, not the push's: the push holds the encoder in its memo.
        found = push.memo[_MEMO] = _Encoder(peer_authn(push), push.registry.endpoints_of)
    assert isinstance(found, _Encoder)
    return found


def encoder(push: PushContext) -> _Encoder:
    """The push's encoder (for a loop over many assignments: one memo lookup)."""
    return _encoder(push)


class _Encoder:
    """One push's encoded groups and the parts they share."""

    __slots__ = (
        "_by_pod",
        "_endpoints",
        "_groups",
        "_localities",
        "_no_peer_authn",
        "_peer_authn",
        "_pod_first",
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
        # By the locality's fields: (str(Locality), for sorting; the framed locality field).
        self._localities: dict[tuple[str, str, str], tuple[str, bytes]] = {}
        self._shared: dict[tuple[str, str, int], bytes] = {}  # by (workload, tlsMode, weight)
        # _shared_part_of by the pod's labels id, and the endpoint it was made for.
        self._by_pod: dict[int, bytes] = {}
        self._pod_first: dict[int, Endpoint] = {}
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
        registered = self._endpoints(svc, port)
        for ep in registered:
            if ep.healthy:
                loc = ep.locality
                where = (loc.region, loc.zone, loc.subzone)
                members = by_locality.get(where)
                if members is None:
                    by_locality[where] = [ep]
                else:
                    members.append(ep)
        localities = self._localities
        for where in by_locality:
            if where not in localities:
                loc = by_locality[where][0].locality
                localities[where] = (str(loc), _locality_field(loc) if any(where) else b"")
        order = sorted(by_locality, key=localities.__getitem__) if len(by_locality) > 1 else None
        lb_endpoint = self._lb_endpoint
        lbs: list[bytes] = []
        ends, fields, framed = [], [], []
        ordered: list[Endpoint] = []  # the endpoints in group order
        for where in order or by_locality:
            members = by_locality[where]
            if len(members) == 1:  # one replica in the locality (usual): no list built
                ep = members[0]
                ordered.append(ep)
                lb = lb_endpoint(ep)
                lbs.append(lb)
                ends.append(len(lbs))
                field = localities[where][1]
                fields.append(field)
                framed.append(framed_group(field, (lb,), ep.weight))
                continue
            ordered += members
            group = [lb_endpoint(ep) for ep in members]
            lbs += group
            ends.append(len(lbs))
            weight = 0
            for ep in members:
                weight += ep.weight
            field = localities[where][1]
            fields.append(field)
            framed.append(framed_group(field, group, weight))
        endpoints: Sequence[Endpoint] = registered
        if len(ordered) != len(registered) or not all(map(operator.is_, ordered, registered)):
            endpoints = ordered  # else already in group order: keep no list of our own
        # Tuples of bytes: the collector stops tracking them, lists it walks every time.
        found = self._groups[key] = _PortGroups(
            endpoints,
            tuple(lbs),
            tuple(ends),
            tuple(fields),
            tuple(framed),
            framed[0] if len(framed) == 1 else b"".join(framed),
        )
        return found

    def _lb_endpoint(self, ep: Endpoint) -> bytes:
        """A LbEndpoint as a lb_endpoints field: the shared part, then this replica's
        address (its enclosing headers from one table when the address is short)."""
        if self._no_peer_authn:
            # A pod serving several ports gets the shared part once: without
            # PeerAuthentications it depends on the pod's labels object, workload,
            # namespace, tlsMode and weight alone. Found by the labels' id, next to the
            # first endpoint it was made for (which keeps the labels, so the id stays
            # unique): no key and no tuple per endpoint, for the garbage collector.
            key = id(ep.labels)
            first = self._pod_first.get(key)
            if first is not None and (
                first.workload_name == ep.workload_name
                and first.namespace == ep.namespace
                and first.tls_mode == ep.tls_mode
                and first.weight == ep.weight
            ):
                prefix = self._by_pod[key]
            else:
                prefix = self._shared_part_of(ep)
                if first is None:
                    self._pod_first[key] = ep
                    self._by_pod[key] = prefix
        else:
            prefix = self._shared_part_of(ep)
        port = self._ports.get(ep.port)
        if port is None:
            port = self._ports[ep.port] = PORT_TAG + varint(ep.port)
        address = ep.address.encode()
        n = len(address)
        if n < 0x80:
            socket = SOCKET_ADDRESS_TAG + ONE_BYTE[n] + address + port
            m = len(socket)
            if m < _ADDRESS_HEADS_LEN:
                address_head = ADDRESS_HEADS[m]
                size = len(prefix) + len(address_head) + m
                if size < 0x80:
                    return LB_ENDPOINTS_TAG + ONE_BYTE[size] + prefix + address_head + socket
                if size < 0x4000:
                    size_bytes = bytes((size & 0x7F | 0x80, size >> 7))
                    return LB_ENDPOINTS_TAG + size_bytes + prefix + address_head + socket
        return lb_endpoint_address(prefix, address, port)

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
            found = self._shared[key] = shared_part(workload, tls_mode, ep.weight)
        return found

    def _mtls_disabled(self, ep: Endpoint) -> bool:
        """The workload's PeerAuthentication disables mTLS on this port."""
        if self._no_peer_authn:
            return False
        index = self._peer_authn
        return index.for_workload(ep.namespace, ep.labels).for_port(ep.port) is MtlsMode.DISABLE


def _locality_field(locality: Locality) -> bytes:
    """The LocalityLbEndpoints.locality field of a locality."""
    body: bytes = base_pb2.Locality(
        region=locality.region, zone=locality.zone, sub_zone=locality.subzone
    ).SerializeToString()
    return GROUP_LOCALITY_TAG + varint(len(body)) + body
