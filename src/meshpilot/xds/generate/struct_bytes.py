"""google.protobuf.Struct and envoy Metadata written straight to the wire.

Istio's metadata (`filter_metadata.istio` on clusters, `istio.workload` and tlsMode on
endpoints) is built for thousands of resources per push. Through upb's Python Struct API
each entry is several Python-level calls; serialized here it is a few concatenations, and
the bytes parse to the same messages (a map is a repeated entry {key = 1, value = 2}).
"""

from __future__ import annotations

from collections.abc import Iterable

from envoy.config.core.v3 import base_pb2
from google.protobuf import struct_pb2

from meshpilot.xds.wire import field_number, length_delimited

__all__ = [
    "bool_value",
    "list_value",
    "metadata",
    "string_value",
    "struct",
    "struct_value",
]

_VALUE = struct_pb2.Value.DESCRIPTOR
_STRING = field_number(_VALUE, "string_value")
_BOOL_TAG = bytes([field_number(_VALUE, "bool_value") << 3])  # a varint field
_STRUCT_VALUE = field_number(_VALUE, "struct_value")
_LIST_VALUE = field_number(_VALUE, "list_value")
_LIST_VALUES = field_number(struct_pb2.ListValue.DESCRIPTOR, "values")
_STRUCT_FIELDS = field_number(struct_pb2.Struct.DESCRIPTOR, "fields")
_FILTER_METADATA = field_number(base_pb2.Metadata.DESCRIPTOR, "filter_metadata")
_KEY, _MAP_VALUE = 1, 2


def string_value(text: str) -> bytes:
    """A serialized Value holding a string."""
    return length_delimited(_STRING, text.encode())


def bool_value(flag: bool) -> bytes:
    return _BOOL_TAG + (b"\x01" if flag else b"\x00")


def struct_value(fields: Iterable[tuple[str, bytes]]) -> bytes:
    """A serialized Value holding a Struct of (key, serialized Value) fields."""
    return length_delimited(_STRUCT_VALUE, struct(fields))


def list_value(values: Iterable[bytes]) -> bytes:
    """A serialized Value holding a list of serialized Values."""
    return length_delimited(
        _LIST_VALUE, b"".join(length_delimited(_LIST_VALUES, v) for v in values)
    )


def struct(fields: Iterable[tuple[str, bytes]]) -> bytes:
    """A serialized Struct of (key, serialized Value) fields."""
    return b"".join(_entry(_STRUCT_FIELDS, key, value) for key, value in fields)


def metadata(filter_metadata: Iterable[tuple[str, bytes]]) -> bytes:
    """A serialized Metadata of (filter name, serialized Struct) entries."""
    return b"".join(_entry(_FILTER_METADATA, key, value) for key, value in filter_metadata)


def _entry(number: int, key: str, value: bytes) -> bytes:
    return length_delimited(
        number, length_delimited(_KEY, key.encode()) + length_delimited(_MAP_VALUE, value)
    )
