"""`proxy-config listeners`: one row per filter chain in istioctl's words."""

from __future__ import annotations

from typing import Any

import pytest

from meshpilot.proxyinfo import ConfigDump, ListenerFilter, listener_table, select_listeners
from meshpilot.proxyinfo.listener_chains import chain_destination, chain_match, listener_type
from meshpilot.proxyinfo.listeners import SHORT_COLUMNS, VERBOSE_COLUMNS
from tests.unit.proxyinfo.dumps import INGRESS, SIDECAR, envoy_dump

HCM = "envoy.filters.network.http_connection_manager"
TCP = "envoy.filters.network.tcp_proxy"


def _rows(
    where: ListenerFilter, case: str = SIDECAR, verbose: bool = True
) -> list[tuple[str, ...]]:
    return list(listener_table(envoy_dump(case), where, verbose).rows)


def test_sidecar_listeners_one_row_per_chain() -> None:
    table = listener_table(envoy_dump(SIDECAR), ListenerFilter())
    assert table.columns == VERBOSE_COLUMNS and table.padding == 1
    rows = list(table.rows)
    assert ("0.0.0.0", "9080", "Trans: raw_buffer; App: http/1.1,h2c", "Route: 9080") in rows
    assert ("0.0.0.0", "9080", "ALL", "PassthroughCluster") in rows
    assert ("0.0.0.0", "15001", "ALL", "PassthroughCluster") in rows
    assert (
        "0.0.0.0",
        "15006",
        "Trans: raw_buffer; Addr: *:9080",
        "Cluster: inbound|9080||",
    ) in rows
    mongo = (
        "10.96.0.14",
        "27017",
        "ALL",
        "Cluster: outbound|27017||mongodb.default.svc.cluster.local",
    )
    assert mongo in rows
    # The agent's static listeners (Envoy admin only), with their inline routes.
    assert ("0.0.0.0", "15021", "ALL", "Inline Route: /healthz/ready*") in rows
    assert ("0.0.0.0", "15090", "ALL", "Inline Route: /stats/prometheus*") in rows
    ports = [int(r[1]) for r in rows]
    assert ports == sorted(ports)


def test_chains_of_one_listener_sorted_by_destination_descending() -> None:
    rows = [r for r in _rows(ListenerFilter(port=15006))]
    destinations = [r[3] for r in rows]
    assert destinations == sorted(destinations, reverse=True)


def test_gateway_listeners_show_sni_and_route_names() -> None:
    rows = _rows(ListenerFilter(), INGRESS)
    assert ("0.0.0.0", "8080", "ALL", "Route: http.8080") in rows
    https = (
        "0.0.0.0",
        "8443",
        "SNI: bookinfo.example.com",
        "Route: https.443.https.bookinfo-gateway.default",
    )
    assert https in rows


def test_short_form_one_row_per_listener_with_its_type() -> None:
    table = listener_table(envoy_dump(SIDECAR), ListenerFilter(), verbose=False)
    assert table.columns == SHORT_COLUMNS
    rows = list(table.rows)
    assert ("0.0.0.0", "9080", "HTTP+TCP") in rows
    assert ("10.96.0.14", "27017", "TCP") in rows
    assert ("0.0.0.0", "15090", "HTTP") in rows


@pytest.mark.parametrize(
    ("where", "ports"),
    [
        (ListenerFilter(port=9080), {"9080"}),
        (ListenerFilter(address="10.96.0.14"), {"27017"}),
        (ListenerFilter(type="tcp"), {"443", "15001", "27017"}),
        (ListenerFilter(address="0.0.0.0", port=15090, type="HTTP"), {"15090"}),
    ],
)
def test_filters(where: ListenerFilter, ports: set[str]) -> None:
    assert {r[1] for r in _rows(where)} == ports
    assert {
        str(lst["address"]["socket_address"]["port_value"])
        for lst in select_listeners(envoy_dump(SIDECAR), where)
    } == ports


def _chain(match: dict[str, Any] | None = None, *filters: dict[str, Any]) -> dict[str, Any]:
    chain: dict[str, Any] = {"filters": list(filters)}
    if match is not None:
        chain["filter_chain_match"] = match
    return chain


MTLS_TCP = ["istio-peer-exchange", "istio"]
ISTIO_HTTP = ["istio", "istio-http/1.0", "istio-http/1.1", "istio-h2"]
TEN_SLASH_8 = [{"address_prefix": "10.0.0.0", "prefix_len": 8}]


@pytest.mark.parametrize(
    ("match", "words"),
    [
        (None, "ALL"),
        ({"server_names": ["a.com", "b.com"]}, "SNI: a.com,b.com"),
        (
            {"transport_protocol": "tls", "application_protocols": MTLS_TCP},
            "Trans: tls; App: TCP TLS",
        ),
        ({"application_protocols": ["http/1.0", "http/1.1", "h2c"]}, "App: HTTP"),
        ({"application_protocols": ISTIO_HTTP}, "App: Istio HTTP Plain"),
        ({"application_protocols": ["h2"]}, "App: h2"),
        ({"destination_port": 80, "prefix_ranges": TEN_SLASH_8}, "Addr: 10.0.0.0/8:80"),
        ({"prefix_ranges": [{"address_prefix": "0.0.0.0"}]}, "Addr: 0.0.0.0/0"),
        ({"destination_port": 9080}, "Addr: *:9080"),
    ],
)
def test_chain_match_words(match: dict[str, Any] | None, words: str) -> None:
    assert chain_match(_chain(match)) == words


def _tcp(cluster: str = "", **config: Any) -> dict[str, Any]:
    return {"name": TCP, "typed_config": {"cluster": cluster, **config} if cluster else config}


@pytest.mark.parametrize(
    ("filters", "destination"),
    [
        ([_tcp("outbound|3306||db")], "Cluster: outbound|3306||db"),
        ([_tcp("PassthroughCluster")], "PassthroughCluster"),
        ([_tcp("BlackHoleCluster")], "Non-HTTP/Non-TCP"),
        ([_tcp(weighted_clusters={"clusters": [{"name": "a"}, {"name": "b"}]})], "Cluster: a,b"),
        ([{"name": HCM, "typed_config": {"rds": {"route_config_name": "80"}}}], "Route: 80"),
        ([{"name": HCM, "typed_config": {}}], "HTTP"),
        ([{"name": "envoy.filters.network.rbac"}], "Non-HTTP/Non-TCP"),
    ],
)
def test_chain_destination_words(filters: list[dict[str, Any]], destination: str) -> None:
    assert chain_destination(_chain(None, *filters)) == destination


def test_inline_routes_catch_all_to_one_cluster_names_the_cluster() -> None:
    routes = {
        "virtual_hosts": [
            {
                "domains": ["*"],
                "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "inbound|80||"}}],
            }
        ]
    }
    hcm = {"name": HCM, "typed_config": {"route_config": routes}}
    assert chain_destination(_chain(None, hcm)) == "Cluster: inbound|80||"
    routes["virtual_hosts"].append(
        {"domains": ["a.com", "b.com"], "routes": [{"match": {"path": "/x"}}]}
    )
    assert chain_destination(_chain(None, hcm)) == "Inline Route: /*; a.com/b.com /x"


def test_listener_type_counts_default_chain_and_ignores_blackhole() -> None:
    listener = {
        "filter_chains": [_chain(None, _tcp("BlackHoleCluster"))],
        "default_filter_chain": _chain(None, {"name": HCM}),
    }
    assert listener_type(listener) == "HTTP"
    assert listener_type({"filter_chains": [_chain(None, _tcp("BlackHoleCluster"))]}) == "UNKNOWN"


def _static_listener(address: dict[str, Any], *extra: str) -> dict[str, Any]:
    listener: dict[str, Any] = {"address": address, "filter_chains": [_chain(None, _tcp("x"))]}
    if extra:
        listener["additional_addresses"] = [
            {"address": {"socket_address": {"address": a, "port_value": 80}}} for a in extra
        ]
    return {"listener": listener}


def test_additional_addresses_and_pipes() -> None:
    section = {
        "@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump",
        "static_listeners": [
            _static_listener({"socket_address": {"address": "0.0.0.0", "port_value": 80}}, "::"),
            _static_listener({"pipe": {"path": "/tmp/sock"}}),
        ],
    }
    dump = ConfigDump({"configs": [section]})
    rows = list(listener_table(dump, ListenerFilter()).rows)
    assert rows == [
        ("/tmp/sock", "0", "ALL", "Cluster: x"),
        ("0.0.0.0,::", "80", "ALL", "Cluster: x"),
    ]
    assert len(select_listeners(dump, ListenerFilter(address="::"))) == 1
