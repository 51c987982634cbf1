"""MERGE as Istio merges: protobuf merge, typed configs merged inside when of the same
type URL and replaced when of another, Durations replaced whole."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.listener.v3 import listener_components_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2

from meshpilot.xds.patch.merge import merge_message
from meshpilot.xds.patch.values import parse_value
from meshpilot.xds.protos import pack

_TCP = "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy"


def _tcp_filter() -> listener_components_pb2.Filter:
    proxy = tcp_proxy_pb2.TcpProxy(stat_prefix="s", cluster="outbound|80||a")
    return listener_components_pb2.Filter(
        name="envoy.filters.network.tcp_proxy", typed_config=pack(proxy)
    )


def test_a_typed_config_of_the_same_type_is_merged_inside() -> None:
    target = _tcp_filter()
    patch = parse_value("NETWORK_FILTER", {"typed_config": {"@type": _TCP, "idle_timeout": "30s"}})
    merge_message(target, patch)
    merged = tcp_proxy_pb2.TcpProxy()
    target.typed_config.Unpack(merged)
    assert (merged.cluster, merged.stat_prefix) == ("outbound|80||a", "s")  # kept
    assert merged.idle_timeout.ToJsonString() == "30s"  # added
    assert target.name == "envoy.filters.network.tcp_proxy"


def test_a_typed_config_of_another_type_replaces_it() -> None:
    target = _tcp_filter()
    echo = "type.googleapis.com/envoy.extensions.filters.network.echo.v3.Echo"
    merge_message(
        target, parse_value("NETWORK_FILTER", {"name": "e", "typed_config": {"@type": echo}})
    )
    assert target.typed_config.type_url == echo
    assert target.name == "e"


def test_durations_are_replaced_repeated_fields_appended() -> None:
    target = cluster_pb2.Cluster(name="c")
    target.connect_timeout.FromJsonString("5s")
    target.dns_lookup_family = cluster_pb2.Cluster.V4_ONLY
    target.transport_socket_matches.add(name="one")
    patch = parse_value(
        "CLUSTER", {"connect_timeout": "0.5s", "transport_socket_matches": [{"name": "two"}]}
    )
    merge_message(target, patch)
    assert target.connect_timeout.ToJsonString() == "0.500s"  # not 5.5s
    assert [m.name for m in target.transport_socket_matches] == ["one", "two"]
    assert target.dns_lookup_family == cluster_pb2.Cluster.V4_ONLY
