"""An outbound cluster's own fields as serialized bytes, merged onto its copied template.

A cluster is its template (shared by every cluster with the same policy, protocol and
discovery type) plus its names, `istio` metadata and, under auto mTLS, its two socket
matches. Setting those through upb field by field, and the subset through the Python
Struct API, cost more than the rest of the cluster: here they are one serialized tail,
merged in C (`MergeFromString`: singular fields of the tail win, repeated fields append,
sub-messages merge, exactly as the field-by-field writes on an empty-valued template did).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from google.protobuf import struct_pb2

from meshpilot.xds.wire import field_number, length_delimited, tag, varint

__all__ = ["identity_fields", "match_entries", "metadata_field", "socket_matches_field"]

_CLUSTER = cluster_pb2.Cluster.DESCRIPTOR
_NAME = field_number(_CLUSTER, "name")
_ALT_STAT_NAME = field_number(_CLUSTER, "alt_stat_name")
_EDS_CONFIG = field_number(_CLUSTER, "eds_cluster_config")
_EDS_SERVICE_NAME = field_number(cluster_pb2.Cluster.EdsClusterConfig.DESCRIPTOR, "service_name")
_METADATA = field_number(_CLUSTER, "metadata")
_MATCHES = field_number(_CLUSTER, "transport_socket_matches")
_MATCH_SOCKET = field_number(
    cluster_pb2.Cluster.TransportSocketMatch.DESCRIPTOR, "transport_socket"
)
_SOCKET_CONFIG = field_number(base_pb2.TransportSocket.DESCRIPTOR, "typed_config")
_ANY_VALUE = 2  # google.protobuf.Any.value
_FILTER_METADATA = field_number(base_pb2.Metadata.DESCRIPTOR, "filter_metadata")
_STRUCT_FIELDS = field_number(struct_pb2.Struct.DESCRIPTOR, "fields")
_STRING_VALUE = field_number(struct_pb2.Value.DESCRIPTOR, "string_value")
_MAP_KEY, _MAP_VALUE = 1, 2  # a map entry is a message {key = 1, value = 2}
_ISTIO_KEY = length_delimited(_MAP_KEY, b"istio")
_NAME_TAG, _ALT_STAT_NAME_TAG = tag(_NAME), tag(_ALT_STAT_NAME)
_EDS_CONFIG_TAG, _EDS_SERVICE_NAME_TAG = tag(_EDS_CONFIG), tag(_EDS_SERVICE_NAME)
_MATCHES_TAG, _MATCH_SOCKET_TAG = tag(_MATCHES), tag(_MATCH_SOCKET)
_SOCKET_CONFIG_TAG, _ANY_VALUE_TAG = tag(_SOCKET_CONFIG), tag(_ANY_VALUE)
_ONE_BYTE = tuple(varint(n) for n in range(0x80))
_SUBSET_KEY = length_delimited(_MAP_KEY, b"subset")


def identity_fields(name: str, eds: bool) -> bytes:
    """`name`, `alt_stat_name` (`<name>;`) and, for EDS, `eds_cluster_config.service_name`."""
    encoded = name.encode()
    n = len(encoded)
    if n + 2 < 0x80:  # the usual name: every length one byte, one join (thousands per push)
        parts = [_NAME_TAG, _ONE_BYTE[n], encoded, _ALT_STAT_NAME_TAG, _ONE_BYTE[n + 1], encoded]
        parts.append(b";")
        if eds:
            parts += (_EDS_CONFIG_TAG, _ONE_BYTE[n + 2], _EDS_SERVICE_NAME_TAG, _ONE_BYTE[n])
            parts.append(encoded)
        return b"".join(parts)
    out = length_delimited(_NAME, encoded) + length_delimited(_ALT_STAT_NAME, encoded + b";")
    if eds:
        out += length_delimited(_EDS_CONFIG, length_delimited(_EDS_SERVICE_NAME, encoded))
    return out


def metadata_field(istio_struct: bytes, subset: str) -> bytes:
    """`metadata.filter_metadata.istio` from the service's serialized Struct, with the
    subset's `subset` entry appended (a later map entry of the same key wins on parse, as
    `Struct["subset"] = ...` would). The headers depend only on lengths: from tables."""
    if subset:
        encoded = subset.encode()
        istio_struct += _subset_head(len(encoded)) + encoded
    return _metadata_head(len(istio_struct)) + istio_struct


@lru_cache(maxsize=512)
def _subset_head(n: int) -> bytes:
    """The Struct `fields` entry `subset` up to its string of `n` bytes."""
    value = length_delimited(_STRING_VALUE, b"\0" * n)
    entry = length_delimited(_STRUCT_FIELDS, _SUBSET_KEY + length_delimited(_MAP_VALUE, value))
    return entry[: len(entry) - n]


@lru_cache(maxsize=1024)
def _metadata_head(n: int) -> bytes:
    """Cluster.metadata with filter_metadata `istio` up to its Struct of `n` bytes."""
    entry = _ISTIO_KEY + length_delimited(_MAP_VALUE, b"\0" * n)
    field = length_delimited(_METADATA, length_delimited(_FILTER_METADATA, entry))
    return field[: len(field) - n]


def socket_matches_field(first: bytes, first_config: bytes, rest: bytes) -> bytes:
    """`transport_socket_matches`: `first` (a serialized match whose socket's config has no
    value) with `first_config` as that value, then `rest` (from `match_entries`). The four
    nested headers are worked out from the lengths and joined once, rather than each level
    copying the bytes below it (this runs once per cluster under auto mTLS)."""
    value_head = _ANY_VALUE_TAG + varint(len(first_config))
    config_size = len(value_head) + len(first_config)
    config_head = _SOCKET_CONFIG_TAG + varint(config_size)
    socket_size = len(config_head) + config_size
    socket_head = _MATCH_SOCKET_TAG + varint(socket_size)
    match_head = _MATCHES_TAG + varint(len(first) + len(socket_head) + socket_size)
    parts = (match_head, first, socket_head, config_head, value_head, first_config, rest)
    return b"".join(parts)


def match_entries(matches: Iterable[bytes]) -> bytes:
    """Serialized TransportSocketMatch messages as `transport_socket_matches` fields."""
    return b"".join(length_delimited(_MATCHES, m) for m in matches)
