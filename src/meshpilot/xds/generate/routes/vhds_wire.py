"""The virtual hosts of a serialized RouteConfiguration, read from its bytes (VHDS split).

A proxy class's route configs hold thousands of virtual hosts; serializing each one from the
message and reading its name and domains through upb costs several times more than walking
the config's bytes once. Protobuf writes fields in number order, so a
virtual host starts with its name (field 1) and domains (field 2); one that does not is
read as a message instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2

from meshpilot.xds.wire import field_number, length_delimited

__all__ = ["RawVirtualHost", "config_fields", "read_virtual_host"]

_LEN = 2  # wire type of length-delimited fields
_VHOSTS = field_number(route_pb2.RouteConfiguration.DESCRIPTOR, "virtual_hosts") << 3 | _LEN
_NAME_NUMBER = field_number(rc.VirtualHost.DESCRIPTOR, "name")
_NAME = _NAME_NUMBER << 3 | _LEN
_DOMAINS = field_number(rc.VirtualHost.DESCRIPTOR, "domains") << 3 | _LEN


@dataclass(slots=True)
class RawVirtualHost:
    name: str
    domains: list[str]
    body: bytes  # the serialized VirtualHost
    name_end: int  # where its leading name field ends; 0 when it does not lead

    def renamed(self, name: str) -> bytes:
        """The same virtual host named `name`: the leading name swapped, else a name field
        appended (the last one wins on parsing)."""
        field = length_delimited(_NAME_NUMBER, name.encode())
        return field + self.body[self.name_end :] if self.name_end else self.body + field


def _varint(raw: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = raw[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def config_fields(config: bytes) -> tuple[list[bytes], list[bytes]]:
    """The serialized virtual hosts of a serialized RouteConfiguration, in order, and its
    other fields as they are on the wire (tag included). Only slices: a virtual host the
    split kept from the previous push is then found by its bytes without being read:
    reading the name and domains of every virtual host per class would be most of the split."""
    bodies: list[bytes] = []
    others: list[bytes] = []
    i, end = 0, len(config)
    while i < end:
        start = i
        key = config[i]
        i += 1
        if key >= 0x80:
            key, i = _varint(config, start)
        wire = key & 7
        if wire == _LEN:
            size = config[i]
            i += 1
            if size >= 0x80:
                size, i = _varint(config, i - 1)
            if key == _VHOSTS:
                bodies.append(config[i : i + size])
                i += size
                continue
            i += size
        elif wire == 0:
            _, i = _varint(config, i)
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"RouteConfiguration: unexpected wire type {wire} at byte {i}")
        others.append(config[start:i])
    return bodies, others


def read_virtual_host(body: bytes) -> RawVirtualHost:
    """The name and domains of a serialized VirtualHost, read from its leading fields."""
    i, end = 0, len(body)
    name, name_end, domains = None, 0, []
    while i < end:
        key, j = _varint(body, i)
        if key not in (_NAME, _DOMAINS):
            break
        size, j = _varint(body, j)
        text = body[j : j + size].decode()
        if key == _DOMAINS:
            domains.append(text)
        elif name is None:
            name, name_end = text, (j + size if i == 0 else 0)
        else:
            name, name_end = None, 0  # repeated: let protobuf decide
            break
        i = j + size
    if name is None:
        vh = rc.VirtualHost.FromString(body)
        return RawVirtualHost(vh.name, list(vh.domains), body, 0)
    return RawVirtualHost(name, domains, body, name_end)
