"""Protobuf wire format, for assembling a message from serialized parts.

Upb makes Python-side message construction and deep copies the dominant cost of generation.
A message whose parts are already serialized (and cached) is assembled by concatenating
length-delimited fields, then parsed once in C: concatenated serializations of the same
message type merge exactly as `MergeFrom` does (singular fields: last wins; sub-messages:
merged; repeated fields: appended).
"""

from __future__ import annotations

from functools import lru_cache

from google.protobuf.descriptor import Descriptor

__all__ = ["field_number", "length_delimited", "tag", "varint"]

_WIRE_LENGTH_DELIMITED = 2


_ONE_BYTE = tuple(bytes((n,)) for n in range(0x80))  # most lengths and numbers: no loop


def varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@lru_cache(maxsize=4096)
def _tag(number: int) -> bytes:
    return varint(number << 3 | _WIRE_LENGTH_DELIMITED)


def tag(number: int) -> bytes:
    """The tag of a length-delimited field (to be followed by a varint length)."""
    return _tag(number)


_TAGS = tuple(_tag(n) for n in range(512))  # field numbers are small: an index, not a call


def length_delimited(number: int, payload: bytes) -> bytes:
    """A string, bytes or sub-message field: tag, length, payload. (Called ~100k times per
    cold generation, hence the inlined common cases.)"""
    n = len(payload)
    field_tag = _TAGS[number] if 0 <= number < 512 else _tag(number)
    if n < 0x80:
        return field_tag + _ONE_BYTE[n] + payload
    if n < 0x4000:
        return field_tag + bytes(((n & 0x7F) | 0x80, n >> 7)) + payload
    return field_tag + varint(n) + payload


def field_number(descriptor: Descriptor, name: str) -> int:
    """The field's number, looked up by name so that a schema change cannot go unnoticed."""
    number: int = descriptor.fields_by_name[name].number
    return number
