"""The rules Envoy checks (protoc-gen-validate annotations of its protos), found in a whole
message, in what changed from a generated one, and along a MERGE's value."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2

from meshpilot.xds.patch.checks import changed_violation, first_violation, merged_violation
from meshpilot.xds.patch.merge import merge_message
from meshpilot.xds.patch.values import parse_value


def _route_config() -> route_pb2.RouteConfiguration:
    config = route_pb2.RouteConfiguration(name="80")
    for i in range(3):
        vhost = config.virtual_hosts.add(name=f"h{i}", domains=[f"h{i}"])
        route = vhost.routes.add(name="r")
        route.match.prefix = "/"
        route.route.cluster = f"c{i}"
    return config


def test_whole_messages() -> None:
    assert first_violation(_route_config()) is None
    bad = parse_value(
        "LISTENER",
        {"name": "x", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 70000}}},
    )
    assert first_violation(bad) == "address.socket_address.port_value: must be at most 65535"
    typed = parse_value(
        "HTTP_FILTER",
        {
            "name": "",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua"
            },
        },
    )
    assert first_violation(typed) == "name: at least 1 character(s) required"


def test_only_what_changed_is_walked_and_an_inserted_item_whole() -> None:
    before = _route_config()
    after = route_pb2.RouteConfiguration()
    after.CopyFrom(before)
    assert changed_violation(after, before) is None
    inserted = route_components_pb2.Route(name="no-match")
    inserted.route.cluster = "c"
    routes = list(after.virtual_hosts[1].routes)
    del after.virtual_hosts[1].routes[:]
    after.virtual_hosts[1].routes.extend([inserted, *routes])
    assert changed_violation(after, before) == "virtual_hosts.routes.match: value is required"


def test_along_a_merge() -> None:
    cluster = cluster_pb2.Cluster(name="c")
    cluster.connect_timeout.FromJsonString("10s")
    patch = parse_value(
        "CLUSTER", {"connect_timeout": "0s", "per_connection_buffer_limit_bytes": 5}
    )
    merge_message(cluster, patch)
    assert merged_violation(cluster, patch) == "connect_timeout: must be greater than 0s"
    fine = parse_value("CLUSTER", {"connect_timeout": "2s"})
    merge_message(cluster, fine)
    assert merged_violation(cluster, fine) is None
