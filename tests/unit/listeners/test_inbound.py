"""virtualInbound: chains per served port, inline inbound routes, passthrough and blackhole
chains, inspectors, and the PeerAuthentication seam (chain variants per mTLS mode)."""

from __future__ import annotations

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from meshpilot.xds.generate.listeners import inbound
from meshpilot.xds.generate.listeners.inbound_tls import (
    ChainProtocol,
    MtlsMode,
    MtlsSettings,
    chain_variants,
)
from tests.unit.listeners.lds_helpers import Target, build, hcm_of, select_chain, target
from tests.unit.listeners.meshes import join, pod, service

SERVER = "app-6d5f7c9b8-qwert.demo"
SERVER_POD = pod("app-6d5f7c9b8-qwert", "10.1.0.30", "app: app, version: v1")
APP = service(
    "app",
    "[{name: http, port: 80, targetPort: 8080}, {name: tcp-admin, port: 9000},"
    " {name: grpc-api, port: 9090}, {name: misc, port: 7000}]",
    "10.96.0.30",
)


def _inbound() -> tuple[object, object]:
    mesh = build(join(SERVER_POD, APP), SERVER)
    return mesh, mesh.listener("virtualInbound")


def test_http_port_chain_uses_target_port_and_inline_route() -> None:
    _, vi = _inbound()
    chain = select_chain(vi, 8080)  # the pod's port, not the service's 80
    assert chain is not None and chain.name == "0.0.0.0_8080"
    assert target(chain) == Target("inline", "inbound|8080||", "inbound|8080||")
    hcm = hcm_of(chain)
    assert hcm is not None
    assert hcm.stat_prefix == "inbound_0.0.0.0_8080;"
    assert hcm.server_name == "istio-envoy"
    vhost = hcm.route_config.virtual_hosts[0]
    assert vhost.name == "inbound|http|80" and list(vhost.domains) == ["*"]
    route = vhost.routes[0]
    assert route.match.prefix == "/"
    assert route.route.timeout.ToSeconds() == 0 and route.route.HasField("timeout")
    assert route.route.max_stream_duration.HasField("grpc_timeout_header_max")
    assert route.route.retry_policy.retry_on == "reset-before-request"
    assert route.decorator.operation == "app.demo.svc.cluster.local:80/*"
    assert hcm.route_config.validate_clusters.value is False


def test_tcp_port_chain_proxies_to_inbound_cluster() -> None:
    _, vi = _inbound()
    assert target(select_chain(vi, 9000)) == Target("tcp", "inbound|9000||")
    # The app's own TLS on a TCP port passes through as TCP too.
    assert target(select_chain(vi, 9000, transport="tls")) == Target("tcp", "inbound|9000||")


def test_grpc_port_gets_http2_and_no_reset_retry() -> None:
    _, vi = _inbound()
    chain = select_chain(vi, 9090)
    hcm = hcm_of(chain) if chain is not None else None
    assert hcm is not None and hcm.HasField("http2_protocol_options")
    assert not hcm.route_config.virtual_hosts[0].routes[0].route.HasField("retry_policy")


def test_sniffed_port_splits_http_and_tcp_by_alpn() -> None:
    _, vi = _inbound()
    http = select_chain(vi, 7000, alpn=["h2c"])
    tcp = select_chain(vi, 7000)
    tls = select_chain(vi, 7000, transport="tls")
    assert target(http) == Target("inline", "inbound|7000||", "inbound|7000||")
    assert target(tcp) == Target("tcp", "inbound|7000||")
    assert target(tls) == Target("tcp", "inbound|7000||")


def test_unknown_ports_pass_through_and_15006_is_blackholed() -> None:
    _, vi = _inbound()
    http = select_chain(vi, 3000, alpn=["http/1.1"])
    assert http is not None and http.name == "virtualInbound-catchall-http"
    assert target(http) == Target(
        "inline", "InboundPassthroughCluster", "InboundPassthroughCluster"
    )
    tcp = select_chain(vi, 3000)
    assert tcp is not None and tcp.name == "virtualInbound"
    assert target(tcp) == Target("tcp", "InboundPassthroughCluster")
    loop = select_chain(vi, 15006)
    assert loop is not None and loop.name == "virtualInbound-blackhole"
    assert target(loop) == Target("tcp", "BlackHoleCluster")


def test_listener_shape_and_inspector_order() -> None:
    _, vi = _inbound()
    assert vi.address.socket_address.port_value == 15006
    assert vi.traffic_direction == base_pb2.INBOUND
    assert vi.continue_on_listener_filters_timeout
    names = [f.name.rsplit(".", 1)[-1] for f in vi.listener_filters]
    assert names == ["original_dst", "tls_inspector", "http_inspector"]
    assert not vi.HasField("default_filter_chain")
    assert vi.filter_chains[0].name == "virtualInbound-blackhole"


def _disabled_ports(listener_filter: object) -> set[int]:
    pred = listener_filter.filter_disabled  # type: ignore[attr-defined]
    rules = list(pred.or_match.rules) if pred.HasField("or_match") else [pred]
    return {r.destination_port_range.start for r in rules}


def test_inspectors_are_off_where_no_chain_needs_them() -> None:
    _, vi = _inbound()
    tls_f, http_f = vi.listener_filters[1], vi.listener_filters[2]
    # Every port has mTLS chains (PERMISSIVE by default); 15006 is the blackhole.
    assert _disabled_ports(tls_f) == {15006}
    # Only the sniffed port (7000) and the catch-all look for HTTP.
    assert _disabled_ports(http_f) == {8080, 9000, 9090, 15006}


def test_two_services_on_one_target_port_build_one_chain_set() -> None:
    # Registry order is by hostname: app-alias (TCP) comes before app (HTTP) and wins 8080.
    other = service(
        "app-alias", "[{name: tcp, port: 81, targetPort: 8080}]", "10.96.0.31", selector="app: app"
    )
    mesh = build(join(SERVER_POD, APP, other), SERVER)
    vi = mesh.listener("virtualInbound")
    on_8080 = [c for c in vi.filter_chains if c.filter_chain_match.destination_port.value == 8080]
    assert {target(c) for c in on_8080} == {Target("tcp", "inbound|8080||")}
    assert [c.filter_chain_match.transport_protocol for c in on_8080] == [
        "tls",  # Istio mTLS (PERMISSIVE by default)
        "tls",  # the app's own TLS
        "raw_buffer",
    ]


def test_pod_without_services_gets_only_catch_all_chains() -> None:
    mesh = build(SERVER_POD, SERVER)
    vi = mesh.listener("virtualInbound")
    assert [c.name for c in vi.filter_chains] == [
        "virtualInbound-blackhole",
        "virtualInbound-catchall-http",  # mTLS
        "virtualInbound-catchall-http",
        "virtualInbound",  # mTLS
        "virtualInbound",
        "virtualInbound",
    ]


def test_interception_none_has_no_inbound_listener() -> None:
    mesh = build(join(SERVER_POD, APP), SERVER, intercept=False)
    assert "virtualInbound" not in mesh.names and "virtualOutbound" not in mesh.names


# --- the PeerAuthentication seam -------------------------------------------------------

CTX = tls_pb2.DownstreamTlsContext(require_client_certificate={"value": True})


def _shape(protocol: ChainProtocol, settings: MtlsSettings) -> list[tuple[str, str, bool]]:
    return [
        (v.option.protocol.value, v.option.transport_protocol, v.tls_context is not None)
        for v in chain_variants(protocol, settings)
    ]


def test_today_every_port_is_permissive_without_tls_contexts() -> None:
    plain = MtlsSettings(port=7000, mode=MtlsMode.PERMISSIVE)
    assert _shape(ChainProtocol.AUTO, plain) == [
        ("HTTP", "raw_buffer", False),
        ("TCP", "raw_buffer", False),
        ("TCP", "tls", False),
    ]
    assert _shape(ChainProtocol.HTTP, plain) == [("HTTP", "raw_buffer", False)]
    assert _shape(ChainProtocol.TCP, plain) == [("TCP", "tls", False), ("TCP", "raw_buffer", False)]


def test_permissive_with_contexts_only_adds_tls_variants() -> None:
    plain = MtlsSettings(port=7000, mode=MtlsMode.PERMISSIVE)
    mtls = MtlsSettings(port=7000, mode=MtlsMode.PERMISSIVE, http=CTX, tcp=CTX)
    for protocol in (ChainProtocol.AUTO, ChainProtocol.HTTP, ChainProtocol.TCP):
        before = [v.option for v in chain_variants(protocol, plain)]
        after = chain_variants(protocol, mtls)
        assert [v.option for v in after if v.tls_context is None] == before
        assert any(v.tls_context is not None for v in after)
    alpns = [v.option.application_protocols for v in chain_variants(ChainProtocol.AUTO, mtls)]
    assert alpns[0] == ("istio-http/1.0", "istio-http/1.1", "istio-h2")
    assert alpns[2] == ("istio-peer-exchange", "istio")


def test_strict_keeps_only_tls_terminating_variants() -> None:
    strict = MtlsSettings(port=7000, mode=MtlsMode.STRICT, http=CTX, tcp=CTX)
    assert _shape(ChainProtocol.AUTO, strict) == [("HTTP", "tls", True), ("TCP", "tls", True)]
    assert _shape(ChainProtocol.TCP, strict) == [("TCP", "tls", True)]


def test_disable_is_plaintext_only() -> None:
    off = MtlsSettings(port=7000, mode=MtlsMode.DISABLE, http=CTX, tcp=CTX)
    assert _shape(ChainProtocol.AUTO, off) == [
        ("HTTP", "raw_buffer", False),
        ("TCP", "raw_buffer", False),  # plaintext that is not HTTP (no fallback from raw_buffer)
        ("TCP", "", False),  # anything else, the app's own TLS included, as Istio does
    ]


def test_seam_contexts_become_transport_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    after = build(join(SERVER_POD, APP), SERVER).listener("virtualInbound")

    def plain(ctx: object, port: int) -> MtlsSettings:
        return MtlsSettings(port=port, mode=MtlsMode.PERMISSIVE)

    with monkeypatch.context() as patch:
        patch.setattr(inbound, "mtls_for_port", plain)
        patch.setattr(inbound, "mtls_for_passthrough", lambda ctx, served: [plain(ctx, 0)])
        before = build(join(SERVER_POD, APP), SERVER).listener("virtualInbound")
    plain_after = [c for c in after.filter_chains if not c.HasField("transport_socket")]
    assert [c.SerializeToString(deterministic=True) for c in plain_after] == [
        c.SerializeToString(deterministic=True) for c in before.filter_chains
    ]
    mtls = select_chain(after, 8080, transport="tls", alpn=["istio-http/1.1"])
    assert mtls is not None and mtls.transport_socket.name == "envoy.transport_sockets.tls"
    assert target(mtls) == Target("inline", "inbound|8080||", "inbound|8080||")
    # Port 8080 now has a TLS chain, so the TLS inspector runs there.
    assert 8080 not in _disabled_ports(after.listener_filters[1])
