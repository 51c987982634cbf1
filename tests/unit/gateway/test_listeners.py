"""Gateway listeners: names, chains per server, SNI, TCP and passthrough forwarding."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2

from meshpilot.xds.protos import Filters
from tests.unit.gateway.meshes import (
    chain_for_sni,
    gateway,
    gateway_config,
    hcm,
    listener,
    tcp_proxy,
    tls_context,
    virtual_service,
)

HTTPS_TWO_HOSTS = """
  - port: {number: 443, name: https-a, protocol: HTTPS}
    hosts: ["a.example.com", "*.a.example.com"]
    tls: {mode: SIMPLE, credentialName: a-cert}
  - port: {number: 443, name: https-b, protocol: HTTPS}
    hosts: ["shop/b.example.com"]
    tls: {mode: SIMPLE, credentialName: b-cert}
"""


def test_http_server_gets_one_hcm_chain_on_its_target_port() -> None:
    config = gateway_config(
        gateway(
            "gw",
            "shop",
            """
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["a.example.com"]
""",
        )
    )
    lis = listener(config, "0.0.0.0_8080")
    assert lis.address.socket_address.port_value == 8080
    assert lis.traffic_direction == base_pb2.OUTBOUND
    assert not lis.HasField("bind_to_port")  # default: the gateway binds the port itself
    assert not lis.listener_filters  # no SNI, no TLS: no tls_inspector
    (chain,) = lis.filter_chains
    assert not chain.HasField("filter_chain_match") and not chain.HasField("transport_socket")
    manager = hcm(chain)
    assert manager.rds.route_config_name == "http.8080"
    assert manager.stat_prefix == "outbound_0.0.0.0_8080;"
    assert manager.use_remote_address.value is True
    assert manager.server_name == "istio-envoy"
    assert [f.name for f in manager.http_filters][-1] == Filters.ROUTER


def test_https_servers_get_a_chain_each_chosen_by_sni() -> None:
    config = gateway_config(gateway("gw", "shop", HTTPS_TWO_HOSTS))
    lis = listener(config, "0.0.0.0_8443")
    assert [f.name for f in lis.listener_filters] == [Filters.TLS_INSPECTOR]
    a = chain_for_sni(lis, "a.example.com")
    assert list(a.filter_chain_match.server_names) == ["*.a.example.com", "a.example.com"]
    assert hcm(a).rds.route_config_name == "https.443.https-a.gw.shop"
    assert chain_for_sni(lis, "x.a.example.com") is a
    b = chain_for_sni(lis, "b.example.com")
    assert list(b.filter_chain_match.server_names) == ["b.example.com"]  # `shop/` dropped
    assert hcm(b).rds.route_config_name == "https.443.https-b.gw.shop"
    assert [
        s.name for s in tls_context(b).common_tls_context.tls_certificate_sds_secret_configs
    ] == ["kubernetes://b-cert"]


def test_wildcard_host_matches_any_sni_but_keeps_tls_inspector_for_alpn() -> None:
    config = gateway_config(
        gateway(
            "gw",
            "shop",
            """
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: SIMPLE, credentialName: any}
""",
        )
    )
    lis = listener(config, "0.0.0.0_8443")
    (chain,) = lis.filter_chains
    assert not chain.HasField("filter_chain_match")
    assert list(tls_context(chain).common_tls_context.alpn_protocols) == ["h2", "http/1.1"]
    assert [f.name for f in lis.listener_filters] == [Filters.TLS_INSPECTOR]
    assert chain.transport_socket_connect_timeout.seconds == 15


def test_https_server_name_is_its_stat_prefix() -> None:
    config = gateway_config(
        gateway(
            "gw",
            "shop",
            """
  - port: {number: 443, name: https, protocol: HTTPS}
    name: shop-https
    hosts: ["a.example.com"]
    tls: {mode: SIMPLE, credentialName: a}
""",
        )
    )
    (chain,) = listener(config, "0.0.0.0_8443").filter_chains
    assert hcm(chain).stat_prefix == "shop-https"


def test_tcp_server_forwards_to_the_bound_tcp_route() -> None:
    config = gateway_config(
        gateway(
            "gw",
            "shop",
            """
  - port: {number: 9000, name: tcp, protocol: TCP}
    hosts: ["*"]
""",
        ),
        virtual_service(
            "db",
            "shop",
            """
  hosts: ["*"]
  gateways: ["gw"]
  tcp:
  - match: [{port: 9001}]
    route: [{destination: {host: web}}]
  - match: [{port: 9000}]
    route: [{destination: {host: db}}]
""",
        ),
    )
    (chain,) = listener(config, "0.0.0.0_9000").filter_chains
    proxy = tcp_proxy(chain)
    # The db Service has a single port, so the cluster uses it rather than the server port.
    assert proxy.cluster == "outbound|5432||db.shop.svc.cluster.local"
    assert proxy.stat_prefix == proxy.cluster


def test_tcp_server_without_route_gets_no_listener() -> None:
    config = gateway_config(
        gateway(
            "gw",
            "shop",
            """
  - port: {number: 9000, name: tcp, protocol: TCP}
    hosts: ["*"]
""",
        )
    )
    assert config.listeners == []


PASSTHROUGH = """
  - port: {number: 443, name: tls, protocol: TLS}
    hosts: ["*.example.com"]
    tls: {mode: PASSTHROUGH}
"""


def test_passthrough_chains_follow_tls_route_sni_hosts() -> None:
    config = gateway_config(
        gateway("gw", "shop", PASSTHROUGH),
        virtual_service(
            "sni",
            "shop",
            """
  hosts: ["a.example.com", "b.example.com"]
  gateways: ["gw"]
  tls:
  - match: [{sniHosts: ["a.example.com"]}]
    route:
    - {destination: {host: web, port: {number: 8000}}, weight: 80}
    - {destination: {host: db}, weight: 20}
  - match: [{sniHosts: ["b.example.com"]}]
    route: [{destination: {host: db}}]
""",
        ),
    )
    lis = listener(config, "0.0.0.0_8443")
    assert [f.name for f in lis.listener_filters] == [Filters.TLS_INSPECTOR]
    a = chain_for_sni(lis, "a.example.com")
    assert not a.HasField("transport_socket")  # passthrough: TLS is not terminated
    weighted = tcp_proxy(a)
    assert weighted.stat_prefix == "sni.shop"
    assert [(c.name, c.weight) for c in weighted.weighted_clusters.clusters] == [
        ("outbound|8000||web.shop.svc.cluster.local", 80),
        ("outbound|5432||db.shop.svc.cluster.local", 20),
    ]
    b = chain_for_sni(lis, "b.example.com")
    assert tcp_proxy(b).cluster == "outbound|5432||db.shop.svc.cluster.local"


def test_passthrough_repeated_sni_is_skipped() -> None:
    route = """
  hosts: ["a.example.com"]
  gateways: ["shop/gw"]
  tls:
  - match: [{sniHosts: ["a.example.com"]}]
    route: [{destination: {host: HOST}}]
"""
    config = gateway_config(
        gateway("gw", "shop", PASSTHROUGH),
        virtual_service("first", "shop", route.replace("HOST", "web")),
        virtual_service("second", "shop", route.replace("HOST", "db")),
    )
    (chain,) = listener(config, "0.0.0.0_8443").filter_chains
    assert tcp_proxy(chain).cluster == "outbound|8000||web.shop.svc.cluster.local"


def test_auto_passthrough_matches_istio_mtls_sni_per_service_port_and_subset() -> None:
    config = gateway_config(
        gateway(
            "eastwest",
            "istio-system",
            """
  - port: {number: 15443, name: tls, protocol: TLS}
    hosts: ["*.shop.svc.cluster.local"]
    tls: {mode: AUTO_PASSTHROUGH}
""",
        ),
        """
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: db, namespace: shop}
spec:
  host: db
  subsets: [{name: v1, labels: {version: v1}}]
""",
    )
    lis = listener(config, "0.0.0.0_15443")
    by_sni = {c.filter_chain_match.server_names[0]: c for c in lis.filter_chains}
    assert sorted(by_sni) == [
        "outbound_.5432_._.db.shop.svc.cluster.local",
        "outbound_.5432_.v1_.db.shop.svc.cluster.local",
        "outbound_.8000_._.web.shop.svc.cluster.local",
    ]
    chain = by_sni["outbound_.5432_.v1_.db.shop.svc.cluster.local"]
    assert list(chain.filter_chain_match.application_protocols) == [
        "istio",
        "istio-peer-exchange",
        "istio-http/1.0",
        "istio-http/1.1",
        "istio-h2",
    ]
    assert tcp_proxy(chain).cluster == "outbound_.5432_.v1_.db.shop.svc.cluster.local"
    names = {f.name for c in lis.filter_chains for f in c.filters}
    assert names == {Filters.TCP_PROXY}  # no sni_cluster: current Istio routes per chain


def test_bind_names_the_listener() -> None:
    config = gateway_config(
        gateway(
            "gw",
            "shop",
            """
  - port: {number: 80, name: http, protocol: HTTP}
    bind: 10.1.0.5
    hosts: ["a.example.com"]
""",
        )
    )
    lis = listener(config, "10.1.0.5_8080")
    assert lis.address.socket_address.address == "10.1.0.5"
    assert hcm(lis.filter_chains[0]).rds.route_config_name == "http.8080.10.1.0.5"


def test_ipv6_only_pod_listens_on_the_ipv6_wildcard() -> None:
    pod = """
apiVersion: v1
kind: Pod
metadata:
  name: ingress-v6
  namespace: istio-system
  labels: {istio: ingressgateway}
spec: {containers: [{name: istio-proxy}]}
status: {phase: Running, podIP: "fd00::5"}
"""
    servers = """
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["a.example.com"]
"""
    config = gateway_config(gateway("gw", "shop", servers), pod, pod="ingress-v6.istio-system")
    lis = listener(config, "::_8080")
    assert lis.address.socket_address.address == "::"
