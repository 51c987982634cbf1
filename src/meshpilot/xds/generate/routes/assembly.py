"""Sidecar route configurations assembled from serialized routes and virtual hosts.

A VirtualService's routes come out the same on every port of its host (only the trace
decorator names the port) and a route config holds one virtual host per service: building
each as upb messages and copying them into virtual hosts and configs cost more than the
translation itself. Here a route is translated once per proxy, serialized without its
decorator, and each route config is one concatenation of length-delimited fields parsed
once in C (see xds/wire.py: concatenated fields merge as protobuf does).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2

from meshpilot.xds import names
from meshpilot.xds.generate.payload_heads import PayloadHeads
from meshpilot.xds.wire import field_number, length_delimited, tag, varint

__all__ = [
    "AssembledRouteConfig",
    "EncodedRoute",
    "VirtualHostParts",
    "assembled_route_config",
    "domains_bytes",
    "encode_route",
    "encoded_route",
    "fixed_operation",
    "match_path",
    "operation_parts",
    "route_configuration",
    "route_entry",
    "virtual_host_bytes",
]

_ROUTE = rc.Route.DESCRIPTOR
_VHOST = rc.VirtualHost.DESCRIPTOR
_CONFIG = route_pb2.RouteConfiguration.DESCRIPTOR
_DECORATOR = field_number(_ROUTE, "decorator")
_OPERATION = field_number(rc.Decorator.DESCRIPTOR, "operation")
_VH_NAME = field_number(_VHOST, "name")
_VH_DOMAINS = field_number(_VHOST, "domains")
_VH_ROUTES = field_number(_VHOST, "routes")
_CONFIG_NAME = field_number(_CONFIG, "name")
_CONFIG_VHOSTS = field_number(_CONFIG, "virtual_hosts")
# include_request_attempt_count = true: a varint field, so spelled out (tag, value 1).
_ATTEMPT_COUNT = (
    varint(_VHOST.fields_by_name["include_request_attempt_count"].number << 3) + b"\x01"
)


_ONE_BYTE_LENGTHS = [varint(n) for n in range(0x80)]  # most names and domains are short


def _field(field_tag: bytes, payload: bytes) -> bytes:
    """wire.length_delimited with the tag already encoded: this runs ~20 times per
    virtual host, and the generic varint loop showed in profiles."""
    n = len(payload)
    return field_tag + (_ONE_BYTE_LENGTHS[n] if n < 0x80 else varint(n)) + payload


_VH_NAME_TAG = tag(_VH_NAME)
_VH_DOMAINS_TAG = tag(_VH_DOMAINS)
_VH_ROUTES_TAG = tag(_VH_ROUTES)
_CONFIG_VHOSTS_TAG = tag(_CONFIG_VHOSTS)


def route_entry(body: bytes) -> bytes:
    """A serialized Route as one entry of `VirtualHost.routes`."""
    return _field(_VH_ROUTES_TAG, body)


def operation_parts(route: rc.Route) -> tuple[str | None, str]:
    """Trace decorator (Istio's): `host:port<path>` for a single cluster, else
    `vsname:<listener port><path>`. Returns (the fixed operation or None, path)."""
    path = match_path(route.match)
    return fixed_operation(route.route.cluster if route.HasField("route") else "", path), path


def match_path(m: rc.RouteMatch) -> str:
    """The path part of a trace decorator's operation."""
    kind = m.WhichOneof("path_specifier")
    path: str = {"prefix": m.prefix + "*", "path": m.path, "safe_regex": m.safe_regex.regex}.get(
        kind or "", "/*"
    )
    return path


def fixed_operation(cluster: str, path: str) -> str | None:
    """`host:port<path>` when the route goes to one outbound cluster, else None."""
    parsed = names.parse_cluster_name(cluster)
    return f"{parsed[3]}:{parsed[1]}{path}" if parsed is not None else None


# Not frozen (never changed once made): a frozen dataclass's __init__ sets each field
# through object.__setattr__, 3-4x the cost, and thousands are made per push.
@dataclass(slots=True)
class EncodedRoute:
    """One translated route, serialized without its decorator; `entry(port)` adds the
    decorator for a listener port."""

    body: bytes
    vs_name: str
    path: str
    catch_all: bool
    fixed: bytes | None  # the whole entry when the decorator does not name the listener port

    def entry(self, port: int) -> bytes:
        if self.fixed is not None:
            return self.fixed
        return route_entry(self.body + _decorator(f"{self.vs_name}:{port}{self.path}"))


# Route.decorator { operation }: the operation is the only variable part, and last.
_DECORATOR_FIELD = PayloadHeads(
    lambda op: length_delimited(_DECORATOR, length_delimited(_OPERATION, op))
)


def _decorator(operation: str) -> bytes:
    return _DECORATOR_FIELD(operation.encode())


def encode_route(body: rc.Route, vs_name: str, catch_all: bool, extra: bytes) -> EncodedRoute:
    """`body`, a route without decorator, serialized and followed by `extra` (more of its
    fields, serialized)."""
    fixed_op, path = operation_parts(body)
    return encoded_route(body.SerializeToString() + extra, vs_name, path, fixed_op, catch_all)


def encoded_route(
    serialized: bytes, vs_name: str, path: str, fixed_op: str | None, catch_all: bool
) -> EncodedRoute:
    """A serialized route without decorator, and what its decorator is made of."""
    fixed = route_entry(serialized + _decorator(fixed_op)) if fixed_op is not None else None
    return EncodedRoute(serialized, vs_name, path, catch_all, fixed)


# Not frozen (never changed once made): a frozen dataclass's __init__ sets each field
# through object.__setattr__, 3-4x the cost, and thousands are made per push.
@dataclass(slots=True)
class VirtualHostParts:
    """A virtual host before serialization: `routes` are `VirtualHost.routes` entries."""

    name: str
    domains: tuple[str, ...]
    routes: bytes
    encoded_domains: bytes | None = None  # `domains_bytes(domains)`, when already made
    serialized: bytes | None = None  # virtual_host_bytes(self), once made (routes/lasting.py)

    def with_domains(self, domains: Iterable[str]) -> VirtualHostParts:
        return VirtualHostParts(self.name, tuple(domains), self.routes)


def virtual_host_bytes(vh: VirtualHostParts) -> bytes:
    """The serialized VirtualHost (name, domains, routes, include_request_attempt_count)."""
    parts = [_field(_VH_NAME_TAG, vh.name.encode())]
    if vh.encoded_domains is not None:
        parts.append(vh.encoded_domains)
    else:
        parts += [_field(_VH_DOMAINS_TAG, d.encode()) for d in vh.domains]
    parts.append(vh.routes)
    parts.append(_ATTEMPT_COUNT)
    return b"".join(parts)


def domains_bytes(domains: Iterable[str]) -> bytes:
    """Domains as serialized `VirtualHost.domains` fields (virtual_host_bytes' part)."""
    parts = []
    for d in domains:  # _field inlined: ~5 per service
        encoded = d.encode()
        n = len(encoded)
        parts.append(_VH_DOMAINS_TAG + (_ONE_BYTE_LENGTHS[n] if n < 0x80 else varint(n)) + encoded)
    return b"".join(parts)


@dataclass(slots=True)
class AssembledRouteConfig:
    """A route config as the generator assembled it: its name, its serialized virtual hosts
    in order, and its other fields serialized. Parsed into a message when first asked for,
    once: a VHDS proxy's config is split from these parts and never needs the parse of a
    large route config, one per class and port on every VirtualService change."""

    name: str
    virtual_hosts: tuple[bytes, ...]
    tail: bytes  # the config's fields other than name and virtual hosts, serialized
    # The virtual hosts' names, when the generator gave them: where an edit finds a host.
    host_names: tuple[str, ...] = field(default=(), compare=False, repr=False)
    _positions: dict[str, int] | None = field(default=None, compare=False, repr=False)
    _message: route_pb2.RouteConfiguration | None = field(default=None, compare=False, repr=False)

    def position(self, host_name: str) -> int | None:
        """Where the virtual host named `host_name` is among `virtual_hosts`."""
        if self._positions is None:
            self._positions = {n: i for i, n in enumerate(self.host_names)}
        return self._positions.get(host_name)

    def edited(self, virtual_hosts: tuple[bytes, ...]) -> AssembledRouteConfig:
        """This config with other bytes for the same virtual hosts, in the same places."""
        edited = AssembledRouteConfig(self.name, virtual_hosts, self.tail, self.host_names)
        edited._positions = self._positions
        return edited

    def message(self) -> route_pb2.RouteConfiguration:
        if self._message is None:
            parts = [length_delimited(_CONFIG_NAME, self.name.encode())]
            parts += [_field(_CONFIG_VHOSTS_TAG, v) for v in self.virtual_hosts]
            parts.append(self.tail)
            self._message = route_pb2.RouteConfiguration.FromString(b"".join(parts))
        return self._message

    def without_virtual_hosts(self) -> bytes:
        """The config's other fields, as protobuf writes them (name first: field 1)."""
        return length_delimited(_CONFIG_NAME, self.name.encode()) + self.tail


def assembled_route_config(
    name: str,
    vhosts: Sequence[bytes],
    tail: route_pb2.RouteConfiguration,
    host_names: Sequence[str] = (),
) -> AssembledRouteConfig:
    """A route config named `name` holding the serialized virtual hosts (named
    `host_names`, when given), then the fields of `tail` (a config without name or virtual
    hosts)."""
    return AssembledRouteConfig(name, tuple(vhosts), tail.SerializeToString(), tuple(host_names))


def route_configuration(
    name: str, vhosts: Sequence[bytes], tail: route_pb2.RouteConfiguration
) -> route_pb2.RouteConfiguration:
    """assembled_route_config(...) as a message."""
    return assembled_route_config(name, vhosts, tail).message()
