"""The VHDS split of a route config: from the virtual hosts the route generator assembled it
from (routes/assembly.py), from the config's own bytes, and across pushes, it is the same
head and the same virtual hosts, and together they are the route config Envoy would have
been sent whole; a VHDS proxy's config is never parsed whole. Delta streams of a class in
the same state share one step over the class's virtual hosts, and a stream in another state
gets its own."""

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
from meshpilot.xds.generate.routes.assembly import AssembledRouteConfig
from meshpilot.xds.generate.routes.sidecar import generate_sidecar_route_parts
from meshpilot.xds.generate.routes.vhds import (
    VhdsSplit,
    generate_sidecar_route_configs,
    merge_virtual_hosts,
    split_route_config,
    vhds_name,
)
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


def _assembled(push: PushContext) -> AssembledRouteConfig:
    proxy = replace(proxy_for(push, "client.default"), vhds=True)
    (config,) = generate_sidecar_route_parts(push, proxy, ["8080"])
    return config


def _as_bytes(split: VhdsSplit) -> tuple[bytes, list[tuple[str, bytes]]]:
    return (
        split.head.SerializeToString(deterministic=True),
        [(vh.name, vh.body) for vh in split.virtual_hosts],
    )


def test_split_from_the_generators_parts_equals_the_split_of_the_configs_bytes() -> None:
    config = _assembled(_push())
    assert len(config.virtual_hosts) == 3  # web, api and the catch-all
    from_parts = split_route_config(config, LastingMemo())
    from_bytes = split_route_config(config.message(), LastingMemo())
    assert _as_bytes(from_parts) == _as_bytes(from_bytes)
    assert _as_bytes(split_route_config(config.message())) == _as_bytes(from_bytes)  # no memo


def test_head_and_virtual_hosts_make_the_whole_route_config() -> None:
    push = _push()
    assembled = _assembled(push)
    split = split_route_config(assembled, push.lasting)
    config = assembled.message()
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


def test_a_vhds_proxy_gets_its_head_without_its_config_parsed_whole() -> None:
    push = _push()
    proxy = replace(proxy_for(push, "client.default"), vhds=True)
    (head,) = generate_sidecar_route_configs(push, proxy, ["8080"])
    assert head.HasField("vhds") and [vh.name for vh in head.virtual_hosts] == ["allow_any"]
    (assembled,) = generate_sidecar_route_parts(push, proxy, ["8080"])
    assert assembled._message is None  # the 1 MB parse a VirtualService change used to pay
    plain = replace(proxy, vhds=False)  # a proxy of the class without VHDS: the whole config
    (whole,) = generate_sidecar_route_configs(push, plain, ["8080"])
    assert whole is assembled._message and len(whole.virtual_hosts) == 3


def test_kept_head_and_virtual_hosts_are_the_previous_splits_objects() -> None:
    push = _push()
    assembled = _assembled(push)
    for config in (assembled, assembled.message()):  # as assembled, and from its bytes
        first = split_route_config(config, push.lasting)
        again = split_route_config(config, push.lasting.successor())
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
    config = _assembled(push)
    assert len(config.virtual_hosts) == 43
    assert _as_bytes(split_route_config(config, LastingMemo())) == _as_bytes(
        split_route_config(config.message(), LastingMemo())
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
