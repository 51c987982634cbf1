"""Which Gateway servers apply to a gateway proxy, on which ports, merged how."""

from __future__ import annotations

from meshpilot.model.merged_gateway import merged_gateway_for, sanitize_hosts
from tests.unit.gateway.meshes import gateway, load

HTTP_80 = """
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["a.example.com"]
"""


def test_selector_over_pod_labels_and_any_namespace() -> None:
    push, proxy = load(
        gateway("in-app-ns", "shop", HTTP_80),
        gateway("other-selector", "istio-system", HTTP_80, selector="istio: egressgateway"),
        gateway("partial-match", "shop", HTTP_80, selector="istio: ingressgateway, x: y"),
    )
    merged = merged_gateway_for(push, proxy)
    assert merged is not None
    names = {s.gateway_name for s in merged.all_servers()}
    # Istio looks at Gateways in every namespace; the selector must be a subset of the labels.
    assert names == {"shop/in-app-ns"}


def test_no_gateway_no_merged_gateway() -> None:
    push, proxy = load(gateway("egress", "istio-system", HTTP_80, selector="istio: egress"))
    assert merged_gateway_for(push, proxy) is None


def test_empty_selector_applies_to_every_gateway_proxy() -> None:
    push, proxy = load(gateway("all", "shop", HTTP_80, selector=""))
    merged = merged_gateway_for(push, proxy)
    assert merged is not None and [s.gateway_name for s in merged.all_servers()] == ["shop/all"]


def test_ports_translate_to_service_target_ports() -> None:
    servers = """
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["a.example.com"]
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: ["a.example.com"]
    tls: {mode: SIMPLE, credentialName: a-cert}
  - port: {number: 7070, name: tcp, protocol: TCP}
    hosts: ["*"]
"""
    push, proxy = load(gateway("gw", "shop", servers))
    merged = merged_gateway_for(push, proxy)
    assert merged is not None
    assert [(sp.number, sp.protocol) for sp in merged.server_ports] == [
        (8080, "HTTP"),
        (8443, "HTTPS"),
        (7070, "TCP"),  # not a Service port: used as is
    ]
    # HTTP route names carry the target port; HTTPS ones the server port and port name.
    assert sorted(merged.servers_by_route_name) == ["http.8080", "https.443.https.gw.shop"]


def test_http_servers_on_one_port_merge_across_gateways() -> None:
    push, proxy = load(
        gateway("one", "shop", HTTP_80),
        gateway("two", "istio-system", HTTP_80.replace("a.example.com", "b.example.com")),
    )
    merged = merged_gateway_for(push, proxy)
    assert merged is not None
    assert len(merged.server_ports) == 1
    servers = merged.servers_by_route_name["http.8080"]
    assert sorted(s.gateway_name for s in servers) == ["istio-system/two", "shop/one"]


def test_conflicting_protocol_on_a_taken_port_is_dropped() -> None:
    tcp_80 = """
  - port: {number: 80, name: tcp, protocol: TCP}
    hosts: ["*"]
"""
    push, proxy = load(gateway("a-http", "shop", HTTP_80), gateway("b-tcp", "shop", tcp_80))
    merged = merged_gateway_for(push, proxy)
    assert merged is not None
    assert [s.gateway_name for s in merged.all_servers()] == ["shop/a-http"]


def test_repeated_tls_host_on_a_port_keeps_the_first_server() -> None:
    https = """
  - port: {number: 443, name: https-X, protocol: HTTPS}
    hosts: ["a.example.com"]
    tls: {mode: SIMPLE, credentialName: X}
"""
    push, proxy = load(
        gateway("first", "shop", https.replace("X", "first")),
        gateway("second", "shop", https.replace("X", "second")),
    )
    merged = merged_gateway_for(push, proxy)
    assert merged is not None
    assert [s.gateway_name for s in merged.all_servers()] == ["shop/first"]


def test_tls_servers_share_a_port_by_sni() -> None:
    servers = """
  - port: {number: 443, name: https-a, protocol: HTTPS}
    hosts: ["a.example.com"]
    tls: {mode: SIMPLE, credentialName: a}
  - port: {number: 443, name: tls-b, protocol: TLS}
    hosts: ["shop/b.example.com"]
    tls: {mode: PASSTHROUGH}
"""
    push, proxy = load(gateway("gw", "shop", servers))
    merged = merged_gateway_for(push, proxy)
    assert merged is not None
    servers_ = merged.all_servers()
    assert [s.sni_hosts for s in servers_] == [("a.example.com",), ("b.example.com",)]
    assert [s.route_name for s in servers_] == ["https.443.https-a.gw.shop", ""]


def test_auto_passthrough_is_recorded() -> None:
    servers = """
  - port: {number: 15443, name: tls, protocol: TLS}
    hosts: ["*.local"]
    tls: {mode: AUTO_PASSTHROUGH}
"""
    push, proxy = load(gateway("eastwest", "istio-system", servers))
    merged = merged_gateway_for(push, proxy)
    assert merged is not None and merged.contains_auto_passthrough
    assert merged.auto_passthrough_sni_hosts == {"*.local"}


def test_sanitize_hosts_as_istio() -> None:
    assert sanitize_hosts(["./a.com", "*/b.com", "x/c.com"], "ns") == (
        "ns/a.com",
        "b.com",
        "x/c.com",
    )
    assert sanitize_hosts(["a.com", "*/*"], "ns") == ("*",)
