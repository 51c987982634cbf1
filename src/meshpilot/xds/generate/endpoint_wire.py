"""The EDS pieces endpoint_groups.py assembles, written straight to the wire.

An assignment is made of thousands of small, nested, length-delimited pieces. Here they are
written framed for the field that holds them, with headers that depend only on a length
precomputed in tables, so the per-endpoint and per-group work is a few concatenations
(tests/unit/xds_generate/test_endpoint_encoding.py holds every piece to upb's bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from envoy.config.core.v3 import address_pb2, health_check_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2 as ec_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from google.protobuf import struct_pb2

from meshpilot.xds.generate.struct_bytes import metadata, string_value, struct
from meshpilot.xds.wire import field_number, length_delimited, tag, varint

__all__ = [
    "ADDRESS_HEADS",
    "CLA_ENDPOINTS_TAG",
    "GROUP_LOCALITY_TAG",
    "LB_ENDPOINTS_TAG",
    "ONE_BYTE",
    "PORT_TAG",
    "SOCKET_ADDRESS_TAG",
    "TLS_MATCH_KEY",
    "framed_group",
    "lb_endpoint_address",
    "shared_part",
    "unframe",
]

TLS_MATCH_KEY = "envoy.transport_socket_match"

ONE_BYTE = tuple(varint(n) for n in range(0x80))
CLA_ENDPOINTS_TAG = tag(field_number(endpoint_pb2.ClusterLoadAssignment.DESCRIPTOR, "endpoints"))
GROUP_LOCALITY_TAG = tag(field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "locality"))
LB_ENDPOINTS_TAG = tag(field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "lb_endpoints"))
_GROUP_WEIGHT_TAG = tag(
    field_number(ec_pb2.LocalityLbEndpoints.DESCRIPTOR, "load_balancing_weight")
)
_UINT32_VALUE = b"\x08"  # google.protobuf.UInt32Value.value: field 1, varint
_LB_ENDPOINT = field_number(ec_pb2.LbEndpoint.DESCRIPTOR, "endpoint")
_LB_METADATA = field_number(ec_pb2.LbEndpoint.DESCRIPTOR, "metadata")
_LB_METADATA_TAG = tag(_LB_METADATA)
_LB_WEIGHT = field_number(ec_pb2.LbEndpoint.DESCRIPTOR, "load_balancing_weight")
# health_status = HEALTHY: a varint field, so spelled out (tag, value).
_HEALTHY = bytes(
    [field_number(ec_pb2.LbEndpoint.DESCRIPTOR, "health_status") << 3, health_check_pb2.HEALTHY]
)
_ENDPOINT_ADDRESS = field_number(ec_pb2.Endpoint.DESCRIPTOR, "address")
_SOCKET = field_number(address_pb2.Address.DESCRIPTOR, "socket_address")
_SOCKET_ADDRESS = field_number(address_pb2.SocketAddress.DESCRIPTOR, "address")
SOCKET_ADDRESS_TAG = tag(_SOCKET_ADDRESS)
# port_value is a varint field: tag = number << 3 | 0
PORT_TAG = varint(field_number(address_pb2.SocketAddress.DESCRIPTOR, "port_value") << 3)


def _head(field_tag: bytes, n: int) -> bytes:
    return field_tag + (ONE_BYTE[n] if n < 0x80 else varint(n))


def _address_head(n: int) -> bytes:
    """The LbEndpoint.endpoint, Endpoint.address and Address.socket_address headers
    around a serialized SocketAddress of `n` bytes: what three length_delimited calls
    would write, as one precomputed piece (each tag is one byte)."""
    socket_head = tag(_SOCKET) + varint(n)
    address_head = tag(_ENDPOINT_ADDRESS) + varint(n + len(socket_head))
    inner = n + len(socket_head) + len(address_head)
    return tag(_LB_ENDPOINT) + varint(inner) + address_head + socket_head


# Up to the size where every header length still takes one byte.
ADDRESS_HEADS = tuple(_address_head(n) for n in range(0x7C))


def lb_endpoint_address(prefix: bytes, address: bytes, port: bytes) -> bytes:
    """A LbEndpoint as a lb_endpoints field, from its shared part (`prefix`), the address
    and the serialized port_value field: the general case (long addresses)."""
    socket = length_delimited(_SOCKET_ADDRESS, address) + port
    lb = prefix + length_delimited(
        _LB_ENDPOINT, length_delimited(_ENDPOINT_ADDRESS, length_delimited(_SOCKET, socket))
    )
    return _head(LB_ENDPOINTS_TAG, len(lb)) + lb


def _weight_field(weight: int) -> bytes:
    return _head(_GROUP_WEIGHT_TAG, 1 + len(varint(weight))) + _UINT32_VALUE + varint(weight)


_UINT32_MAX = 2**32 - 1
_WEIGHT_FIELDS = tuple(_weight_field(w) for w in range(0x80))


def framed_group(locality: bytes, lbs: Sequence[bytes], weight: int) -> bytes:
    """A LocalityLbEndpoints as a ClusterLoadAssignment.endpoints field, from its locality
    field (empty for none), lb_endpoints fields and weight; one join, no nested copies.
    The weight (its endpoints' sum) is capped at Envoy's uint32, past which it would wrap."""
    weight = min(weight, _UINT32_MAX)
    weight_field = _WEIGHT_FIELDS[weight] if weight < 0x80 else _weight_field(weight)
    if len(lbs) == 1:
        n = len(locality) + len(lbs[0]) + len(weight_field)
        return _head(CLA_ENDPOINTS_TAG, n) + locality + lbs[0] + weight_field
    n = len(locality) + sum(map(len, lbs)) + len(weight_field)
    return b"".join([_head(CLA_ENDPOINTS_TAG, n), locality, *lbs, weight_field])


def unframe(framed: bytes) -> bytes:
    """The message inside one framed field: what follows its tag and length."""
    i = 1  # every tag here is one byte
    while framed[i] & 0x80:
        i += 1
    return framed[i + 1 :]


def shared_part(workload: str, tls_mode: str, weight: int) -> bytes:
    """What a workload's LbEndpoints share: health, weight and Istio's metadata
    (`istio.workload` if `workload`, the tlsMode transport socket match if `tls_mode`)."""
    md = _tls_mode_entry(tls_mode) if tls_mode else b""
    if workload:
        encoded = workload.encode()
        md = _workload_head(len(encoded)) + encoded + md
    out = _HEALTHY + (_WEIGHTS[weight] if 0 <= weight < 0x80 else _lb_weight(weight))
    if md:
        out += _head(_LB_METADATA_TAG, len(md)) + md
    return out


def _lb_weight(weight: int) -> bytes:
    return length_delimited(_LB_WEIGHT, _UINT32_VALUE + varint(weight) if weight else b"")


_WEIGHTS = tuple(_lb_weight(w) for w in range(0x80))


@lru_cache(maxsize=256)
def _workload_head(n: int) -> bytes:
    """Metadata.filter_metadata `istio` = {workload: <string of n bytes>} up to that
    string: every byte before it depends only on its length."""
    probe = b"\x00" * n
    framed = _istio_workload(probe)
    return framed[: len(framed) - n]


def _istio_workload(encoded: bytes) -> bytes:
    value = length_delimited(_STRING, encoded)
    return metadata([("istio", struct([("workload", value)]))])


_STRING = field_number(struct_pb2.Value.DESCRIPTOR, "string_value")


@lru_cache(maxsize=8)
def _tls_mode_entry(tls_mode: str) -> bytes:
    """The `envoy.transport_socket_match` entry of endpoint metadata (tlsMode)."""
    return metadata([(TLS_MATCH_KEY, struct([("tlsMode", string_value(tls_mode))]))])
