"""VHDS (opt-in, `settings.vhds`): sidecar route configs split into a head and virtual hosts.

Not istiod's output. A Delta xDS sidecar with VHDS on gets each outbound HTTP route config
(`<port>`) without its service virtual hosts and with `vhds` (config source ADS); Envoy
then subscribes to VirtualHost resources under the route config's name and merges what it
is sent into the table. A VirtualService change re-sends the changed virtual hosts only:
the head is unchanged and Delta xDS leaves unchanged virtual hosts out: a few kB per proxy
instead of a whole route config per port (docs/benchmarks.md, B3).

Envoy matches VHDS resources to a route config by the part of their name before the last
`/` (namespace matching), and removes a virtual host by its name: so a virtual host is named
`<route config>/<host>:<port>` both as a resource and in the table. The catch-all virtual
host (`allow_any` / `block_all`, domain `*`) stays in the head. Sniffed services' own route
configs (`<host>:<port>`, one virtual host) and gateways' route configs stay whole.

The split is built on the route generator's output as it assembled it (routes/assembly.py:
the serialized virtual hosts and the config's other fields, shared by a proxy class and
carried over across pushes), once per push and config: a VHDS proxy's route config is
never parsed whole.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2

from meshpilot.model.lasting_memo import LastingMemo
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.routes.assembly import AssembledRouteConfig
from meshpilot.xds.generate.routes.sidecar import (
    generate_sidecar_route_parts,
    generate_sidecar_routes,
)
from meshpilot.xds.generate.routes.vhds_wire import config_fields, read_virtual_host
from meshpilot.xds.protos import ads_source
from meshpilot.xds.wire import field_number, length_delimited

__all__ = [
    "ClassVirtualHosts",
    "EncodedVirtualHost",
    "VhdsSplit",
    "generate_sidecar_route_configs",
    "generate_sidecar_virtual_hosts",
    "merge_virtual_hosts",
    "no_virtual_hosts",
    "route_config_of",
    "split_route_config",
    "vhds_name",
]

_MEMO = "rds.vhds-split"
_KEPT = "rds.vhds-virtual-host"
_LISTS = "rds.vhds-lists"
_HEAD = "rds.vhds-head"
_STATIC = "static"  # a kept virtual host that stays in the head (the catch-all)
_VHOSTS = field_number(route_pb2.RouteConfiguration.DESCRIPTOR, "virtual_hosts")
# `vhds { config_source { ads {} } }` as a RouteConfiguration field, appended to a head.
_VHDS_FIELD = route_pb2.RouteConfiguration(
    vhds=route_pb2.Vhds(config_source=ads_source())
).SerializeToString(deterministic=True)


@dataclass(frozen=True, slots=True)
class EncodedVirtualHost:
    """A VHDS VirtualHost kept serialized: the ADS server sends its bytes as they are
    (xds/resources.py reads `name` and `SerializeToString`). A proxy class has thousands of
    virtual hosts per push; parsing them into messages and serializing them again would be
    most of the split's cost."""

    name: str
    body: bytes

    def SerializeToString(self, deterministic: bool = False) -> bytes:
        return self.body

    def message(self) -> rc.VirtualHost:
        return rc.VirtualHost.FromString(self.body)


class ClassVirtualHosts(list[EncodedVirtualHost]):
    """The virtual hosts of a proxy class's route configs, one list per push and class:
    the ADS server makes it resources once (xds/resources.py), not once per stream: a walk
    over every virtual host per stream would dominate a push to many proxies."""


@dataclass(frozen=True, slots=True)
class VhdsSplit:
    head: route_pb2.RouteConfiguration  # the config with `vhds` and only static virtual hosts
    virtual_hosts: tuple[EncodedVirtualHost, ...]  # named `<route config>/<virtual host>`


def vhds_name(route_config: str, virtual_host: str) -> str:
    return f"{route_config}/{virtual_host}"


def route_config_of(resource_name: str) -> str:
    """The route config a VHDS name belongs to: Envoy subscribes with the route config's
    name, and (on demand) with `<route config>/<host>`."""
    return resource_name.rpartition("/")[0] or resource_name


def _split_eligible(config: AssembledRouteConfig | route_pb2.RouteConfiguration) -> bool:
    """Outbound HTTP port route configs (`<port>`); sniffed ones are one virtual host."""
    return bool(config.name.isdigit())


def split_route_config(
    config: AssembledRouteConfig | route_pb2.RouteConfiguration, kept: LastingMemo | None = None
) -> VhdsSplit:
    """The head and the virtual hosts of `config`. With `kept` (the push's lasting memo), a
    virtual host whose bytes the previous push split already is that push's very object,
    found by its bytes without reading them: the ADS server then finds its resource made
    (xds/resources.py), and after a VirtualService change only the changed virtual hosts
    are new. So is the head while its bytes stay, shared by the classes whose heads are
    equal (the config's name, the catch-all and the config's own fields). An assembled
    config's virtual hosts are looked up as the generator made them, and a new one is sent
    as protobuf writes it in the config; a message's are read from its bytes."""
    parts: Sequence[bytes]
    written: Sequence[bytes] | None
    if isinstance(config, AssembledRouteConfig):
        parts, fields, written = config.virtual_hosts, [config.without_virtual_hosts()], None
    else:
        parts, fields = config_fields(config.SerializeToString(deterministic=True))
        written = parts
    found = [kept.get((_KEPT, config.name, part)) for part in parts] if kept is not None else []
    moved = []
    for i, part in enumerate(parts):
        entry = found[i] if found else None
        if entry is None:
            if written is None:  # once per config, and only for a config with new hosts
                assert isinstance(config, AssembledRouteConfig)
                written = _written_virtual_hosts(config, found)
            entry = _moved_or_static(config.name, written[i])
            if kept is not None:
                kept.put((_KEPT, config.name, part), entry)
        if entry is _STATIC:
            fields.append(length_delimited(_VHOSTS, part))
        else:
            assert isinstance(entry, EncodedVirtualHost)
            moved.append(entry)
    fields.append(_VHDS_FIELD)
    head_bytes = b"".join(fields)
    head_key = (_HEAD, head_bytes)
    head = kept.get(head_key) if kept is not None else None
    if not isinstance(head, route_pb2.RouteConfiguration):
        head = route_pb2.RouteConfiguration.FromString(head_bytes)
        if kept is not None:
            kept.put(head_key, head)
    return VhdsSplit(head, tuple(moved))


def _moved_or_static(config_name: str, body: bytes) -> EncodedVirtualHost | str:
    """A virtual host as a VHDS resource, or `_STATIC` for the catch-all (domain `*`: the
    same for every change, it stays in the head)."""
    vh = read_virtual_host(body)
    if "*" in vh.domains:
        return _STATIC
    name = vhds_name(config_name, vh.name)
    return EncodedVirtualHost(name, vh.renamed(name))


# From this many new virtual hosts on, the whole config is serialized once to read them.
_WRITE_WHOLE_FROM = 32


def _written_virtual_hosts(
    config: AssembledRouteConfig, found: Sequence[object]
) -> Sequence[bytes]:
    """The config's virtual hosts as protobuf writes them (the generator's parts may hold
    the same fields in another order): the bytes sent are those of the config as a whole,
    whichever way the split came to them. Only those not kept are needed: after a
    VirtualService change a few, in a first split all of them."""
    parts = config.virtual_hosts
    missing = found.count(None) if found else len(parts)
    if missing >= _WRITE_WHOLE_FROM:
        return config_fields(config.message().SerializeToString(deterministic=True))[0]
    return [
        part if found and found[i] is not None else _rewritten(part) for i, part in enumerate(parts)
    ]


def _rewritten(body: bytes) -> bytes:
    written: bytes = rc.VirtualHost.FromString(body).SerializeToString(deterministic=True)
    return written


def _split(push: PushContext, config: AssembledRouteConfig) -> VhdsSplit | None:
    """Memoised by identity (the memo pins the config), in the lasting memo: proxies of a
    class share their route configs, so they share the split and its bytes, and a route
    config carried over from the previous push (xds/cache.py) keeps its split."""
    if not _split_eligible(config):
        return None
    key = (_MEMO, id(config))
    found = push.lasting.get(key)
    if not (isinstance(found, tuple) and found[0] is config):
        found = (config, split_route_config(config, push.lasting))
        push.lasting.put(key, found)
    split = found[1]
    assert isinstance(split, VhdsSplit)
    return split


def generate_sidecar_route_configs(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[route_pb2.RouteConfiguration]:
    """The sidecar route configs; for a proxy served by VHDS, their heads."""
    if not proxy.vhds:
        return generate_sidecar_routes(push, proxy, names)
    configs = generate_sidecar_route_parts(push, proxy, names)
    return [split.head if (split := _split(push, c)) else c.message() for c in configs]


def generate_sidecar_virtual_hosts(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[EncodedVirtualHost]:
    """The VHDS virtual hosts of the route configs named (a route config's name, or a name
    under it); None: of every route config of the proxy."""
    wanted = None if names is None else sorted({route_config_of(n) for n in names})
    configs = generate_sidecar_route_parts(push, proxy, wanted)
    memo = push.memo.setdefault(_LISTS, {})
    assert isinstance(memo, dict)
    key = tuple(map(id, configs))  # the configs are pinned by the split memo
    found = memo.get(key)
    if found is None:
        found = memo[key] = ClassVirtualHosts()
        for config in configs:
            split = _split(push, config)
            if split is not None:
                found.extend(split.virtual_hosts)
    assert isinstance(found, ClassVirtualHosts)
    return found


def no_virtual_hosts(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[EncodedVirtualHost]:
    """Gateways' route configs are never split."""
    return []


def merge_virtual_hosts(
    head: route_pb2.RouteConfiguration, virtual_hosts: Iterable[EncodedVirtualHost]
) -> route_pb2.RouteConfiguration:
    """The table Envoy builds from a head and its VHDS virtual hosts (static ones first)."""
    full = route_pb2.RouteConfiguration()
    full.CopyFrom(head)
    full.ClearField("vhds")
    full.virtual_hosts.extend(vh.message() for vh in virtual_hosts)
    return full
