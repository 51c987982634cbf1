"""The VHDS split of a route config: from the virtual hosts the route generator assembled it
from (routes/vhds_parts.py), from the config's own bytes, and across pushes, it is the same
head and the same virtual hosts, and together they are the route config Envoy would have
been sent whole. Delta streams of a class in the same state share one step over the class's
virtual hosts, and a stream in another state gets its own."""

from __future__ import annotations

from dataclasses import replace

from envoy.config.core.v3.base_pb2 import Node
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryRequest,
    DeltaDiscoveryResponse,
)

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_text
from meshpilot.model.lasting_memo import LastingMemo
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.connection import Connection
from meshpilot.xds.delta import on_delta_request, push_delta_responses
from meshpilot.xds.generate.routes.sidecar import generate_sidecar_routes
from meshpilot.xds.generate.routes.vhds import (
    VhdsSplit,
    merge_virtual_hosts,
    split_route_config,
    vhds_name,
)
from meshpilot.xds.generate.routes.vhds_parts import remembered_virtual_hosts
from meshpilot.xds.metrics import Metrics
from meshpilot.xds.node import parse_node
from meshpilot.xds.node import proxy_for as node_proxy_for
from meshpilot.xds.protos import TypeUrl, ads_source
from meshpilot.xds.push_request import request_for_change
from meshpilot.xds.resources import SharedResources, generate_resources
from meshpilot.xds.stream_loop import _same_proxy
from tests.conftest import proxy_for
from tests.unit.xds_server.test_vhds import API_VH, APP, WEB_VH, _vs
from tests.unit.xds_server.test_vhds_kept import _pushes

METRICS = Metrics()
WEB_KEY = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "web")


def _push() -> PushContext:
    loaded = load_text(APP + _vs("3s"), "app.yaml")
    return build_push_context(list(loaded.objects), loaded.mesh)


def _config(push: PushContext) -> route_pb2.RouteConfiguration:
    proxy = replace(proxy_for(push, "client.default"), vhds=True)
    (config,) = generate_sidecar_routes(push, proxy, ["8080"])
    return config


def _as_bytes(split: VhdsSplit) -> tuple[bytes, list[tuple[str, bytes]]]:
    return (
        split.head.SerializeToString(deterministic=True),
        [(vh.name, vh.body) for vh in split.virtual_hosts],
    )


def test_split_from_the_generators_parts_equals_the_split_of_the_configs_bytes() -> None:
    push = _push()
    config = _config(push)
    parts = remembered_virtual_hosts(push, config)
    assert parts is not None and len(parts) == 3  # web, api and the catch-all
    from_parts = split_route_config(config, LastingMemo(), parts)
    from_bytes = split_route_config(config, LastingMemo())
    assert _as_bytes(from_parts) == _as_bytes(from_bytes)
    assert _as_bytes(split_route_config(config)) == _as_bytes(from_bytes)  # nothing kept


def test_head_and_virtual_hosts_make_the_whole_route_config() -> None:
    push = _push()
    config = _config(push)
    split = split_route_config(config, push.lasting, remembered_virtual_hosts(push, config))
    assert [vh.name for vh in split.head.virtual_hosts] == ["allow_any"]
    assert split.head.vhds.config_source == ads_source()
    expected = route_pb2.RouteConfiguration()
    expected.CopyFrom(config)
    del expected.virtual_hosts[:]
    expected.virtual_hosts.extend(vh for vh in config.virtual_hosts if "*" in vh.domains)
    for vh in config.virtual_hosts:
        if "*" not in vh.domains:
            renamed = rc.VirtualHost()
            renamed.CopyFrom(vh)
            renamed.name = vhds_name(config.name, vh.name)
            expected.virtual_hosts.append(renamed)
    assert merge_virtual_hosts(split.head, split.virtual_hosts) == expected


def test_a_config_not_built_by_this_push_is_split_from_its_bytes() -> None:
    push = _push()
    config = _config(push)
    later = replace(push, memo={})
    assert remembered_virtual_hosts(later, config) is None
    assert remembered_virtual_hosts(push, route_pb2.RouteConfiguration(name="8080")) is None


def test_kept_head_and_virtual_hosts_are_the_previous_splits_objects() -> None:
    push = _push()
    config = _config(push)
    parts = remembered_virtual_hosts(push, config)
    for given in (parts, None):  # from the generator's parts, and from the config's bytes
        first = split_route_config(config, push.lasting, given)
        again = split_route_config(config, push.lasting.successor(), given)
        assert again.head is first.head
        assert all(a is b for a, b in zip(again.virtual_hosts, first.virtual_hosts, strict=True))


def test_many_new_virtual_hosts_are_read_from_the_whole_config() -> None:
    """Past `_WRITE_WHOLE_FROM` new hosts the config is serialized once: the same bytes."""
    services = "".join(
        APP.split("---\n")[0]
        .replace("name: web", f"name: s{i}")
        .replace("10.96.0.20", f"10.96.1.{i}")
        + "---\n"
        for i in range(40)
    )
    loaded = load_text(services + APP + _vs("3s"), "app.yaml")
    push = build_push_context(list(loaded.objects), loaded.mesh)
    config = _config(push)
    parts = remembered_virtual_hosts(push, config)
    assert parts is not None and len(parts) == 43
    assert _as_bytes(split_route_config(config, LastingMemo(), parts)) == _as_bytes(
        split_route_config(config, LastingMemo())
    )


def test_a_class_gets_its_virtual_hosts_as_one_shared_list() -> None:
    push = _push()
    proxy = replace(proxy_for(push, "client.default"), vhds=True)
    first = generate_resources(push, proxy, TypeUrl.VIRTUAL_HOST, ["8080"])
    second = generate_resources(push, proxy, TypeUrl.VIRTUAL_HOST, ["8080"])
    assert isinstance(first, SharedResources) and second is first
    assert sorted(r.name for r in first) == [
        "8080/api.default.svc.cluster.local:8080",
        "8080/web.default.svc.cluster.local:8080",
    ]


def _stream(push: PushContext) -> tuple[Connection, list[DeltaDiscoveryResponse]]:
    """A Delta stream of client.default subscribed to route 8080 and its virtual hosts."""
    node = replace(parse_node(Node(id="sidecar~10.0.0.9~client.default~default.svc.cluster.local")),
                   vhds=True)  # fmt: skip
    conn = Connection(node, node_proxy_for(push, node), push, delta=True)
    got = []
    for type_url, names in ((TypeUrl.ROUTE, ["8080"]), (TypeUrl.VIRTUAL_HOST, [])):
        request = DeltaDiscoveryRequest(type_url=type_url, resource_names_subscribe=names)
        for raw in on_delta_request(conn, request, METRICS):
            got.append(DeltaDiscoveryResponse.FromString(raw))
            ack = DeltaDiscoveryRequest(type_url=got[-1].type_url, response_nonce=got[-1].nonce)
            on_delta_request(conn, ack, METRICS)
    return conn, got


def test_streams_in_one_state_share_the_step_and_each_gets_the_changed_host() -> None:
    before, after = _pushes()
    streams = [_stream(before) for _ in range(3)]
    for _, got in streams:
        assert [r.type_url for r in got] == [TypeUrl.ROUTE, TypeUrl.VIRTUAL_HOST]
        assert sorted(r.name for r in got[1].resources) == [API_VH, WEB_VH]
    own, _ = streams[2]
    own.known[TypeUrl.VIRTUAL_HOST] = dict(own.known[TypeUrl.VIRTUAL_HOST])  # its own state
    del own.known[TypeUrl.VIRTUAL_HOST][API_VH]  # (as after a NACK of it)
    request = replace(request_for_change(frozenset({WEB_KEY})), push=after, full=True)
    sent = {}
    for conn, _ in streams:
        (raw,) = push_delta_responses(conn, request, METRICS)
        sent[conn.id] = sorted(r.name for r in DeltaDiscoveryResponse.FromString(raw).resources)
    first, second = streams[0][0], streams[1][0]
    assert sent[first.id] == sent[second.id] == [WEB_VH]
    assert first.known[TypeUrl.VIRTUAL_HOST] is second.known[TypeUrl.VIRTUAL_HOST]
    assert sent[own.id] == [API_VH, WEB_VH]


def test_a_stream_keeps_its_proxy_unless_its_pod_changed() -> None:
    """A full push remakes a stream's Proxy only when its Pod (or the domain) changed."""
    before, after = _pushes()  # the VirtualService changed, the client's Pod did not
    conn, _ = _stream(before)
    assert _same_proxy(conn, after)
    relabeled = APP.replace("labels: {app: client}", "labels: {app: client, tier: new}")
    loaded = load_text(relabeled + _vs("3s"), "app.yaml")
    changed = build_push_context(list(loaded.objects), loaded.mesh)
    assert not _same_proxy(conn, changed)
    assert node_proxy_for(changed, conn.node).labels["tier"] == "new"
