"""Per-port outbound listeners: where each service port listens, what a connection to it
selects, and how services sharing a port are resolved (Istio's conflict rules)."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2

from meshpilot.xds.generate.listeners.chain_opts import ChainOpts
from tests.unit.listeners.lds_helpers import Target, build, hcm_of, outbound_call, target
from tests.unit.listeners.meshes import CLIENT, CLIENT_POD, join, pod, service

HTTP_ALPN = {"alpn": ["http/1.1"]}


def test_http_services_share_the_wildcard_listener_and_route_by_port() -> None:
    mesh = build(
        join(
            CLIENT_POD,
            service("web", "[{name: http, port: 8080}]", "10.96.0.1"),
            service("api", "[{name: http-api, port: 8080}]", "10.96.0.2"),
        ),
        CLIENT,
    )
    assert "0.0.0.0_8080" in mesh.names
    assert not any(n.endswith("_8080") and n != "0.0.0.0_8080" for n in mesh.names)
    for vip in ("10.96.0.1", "10.96.0.2"):
        listener, chain = outbound_call(mesh.listeners, vip, 8080, **HTTP_ALPN)
        assert listener == "0.0.0.0_8080"
        assert target(chain) == Target("rds", "8080")
    lst = mesh.listener("0.0.0.0_8080")
    assert lst.bind_to_port.value is False and lst.HasField("bind_to_port")
    assert lst.traffic_direction == base_pb2.OUTBOUND
    assert [f.name for f in lst.listener_filters] == ["envoy.filters.listener.http_inspector"]


def test_non_http_bytes_on_an_http_port_pass_through() -> None:
    mesh = build(
        join(CLIENT_POD, service("web", "[{name: http, port: 8080}]", "10.96.0.1")), CLIENT
    )
    _, chain = outbound_call(mesh.listeners, "10.96.0.1", 8080)  # no ALPN: not HTTP
    assert chain is not None and chain.name == "PassthroughFilterChain"
    assert target(chain) == Target("tcp", "PassthroughCluster")
    _, tls = outbound_call(mesh.listeners, "10.96.0.1", 8080, transport="tls")
    assert target(tls) == Target("tcp", "PassthroughCluster")


def test_outbound_hcm_carries_istio_defaults() -> None:
    mesh = build(
        join(CLIENT_POD, service("web", "[{name: http, port: 8080}]", "10.96.0.1")), CLIENT
    )
    _, chain = outbound_call(mesh.listeners, "10.96.0.1", 8080, **HTTP_ALPN)
    assert chain is not None
    hcm = hcm_of(chain)
    assert hcm is not None
    assert hcm.stat_prefix == "outbound_0.0.0.0_8080;"
    assert hcm.rds.config_source.HasField("ads")
    assert hcm.rds.config_source.initial_fetch_timeout.ToSeconds() == 0
    assert hcm.use_remote_address.value is False and hcm.HasField("use_remote_address")
    assert [u.upgrade_type for u in hcm.upgrade_configs] == ["websocket"]
    assert hcm.normalize_path.value is True
    assert hcm.HasField("stream_idle_timeout") and hcm.stream_idle_timeout.ToSeconds() == 0
    assert hcm.http_filters[-1].name == "envoy.filters.http.router"
    assert not hcm.server_name  # outbound keeps Envoy's default server name
    assert chain.transport_socket_connect_timeout.ToSeconds() == 15


def test_tcp_service_listens_on_its_vip() -> None:
    mesh = build(
        join(CLIENT_POD, service("db", "[{name: tcp-db, port: 5432}]", "10.96.0.5")), CLIENT
    )
    listener, chain = outbound_call(mesh.listeners, "10.96.0.5", 5432)
    assert listener == "10.96.0.5_5432"
    assert target(chain) == Target("tcp", "outbound|5432||db.demo.svc.cluster.local")
    lst = mesh.listener("10.96.0.5_5432")
    assert not lst.listener_filters  # no inspection: server-first protocols must work
    assert not lst.HasField("default_filter_chain")
    # Another IP on the same port is not this service.
    assert outbound_call(mesh.listeners, "10.9.9.9", 5432)[0] == "virtualOutbound"


def test_tcp_service_without_vip_uses_the_wildcard_and_first_one_wins() -> None:
    entries = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext-b, namespace: demo}
spec:
  hosts: [b.example.com]
  ports: [{number: 6379, name: tcp-redis, protocol: TCP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext-a, namespace: demo}
spec:
  hosts: [a.example.com]
  ports: [{number: 6379, name: tcp-redis, protocol: TCP}]
  resolution: DNS
"""
    mesh = build(join(CLIENT_POD, entries), CLIENT)
    lst = mesh.listener("0.0.0.0_6379")
    assert len(lst.filter_chains) == 1  # identical match-all chains cannot both exist
    _, chain = outbound_call(mesh.listeners, "203.0.113.7", 6379)
    assert target(chain) == Target("tcp", "outbound|6379||a.example.com")


def test_http_and_tcp_on_one_wildcard_port_become_sniffed() -> None:
    entries = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: legacy, namespace: demo}
spec:
  hosts: [legacy.example.com]
  ports: [{number: 8080, name: tcp, protocol: TCP}]
  resolution: DNS
"""
    mesh = build(
        join(CLIENT_POD, service("web", "[{name: http, port: 8080}]", "10.96.0.1"), entries),
        CLIENT,
    )
    lst = mesh.listener("0.0.0.0_8080")
    _, http = outbound_call(mesh.listeners, "10.96.0.1", 8080, **HTTP_ALPN)
    assert target(http) == Target("rds", "8080")
    _, tcp = outbound_call(mesh.listeners, "198.51.100.1", 8080)
    assert target(tcp) == Target("tcp", "outbound|8080||legacy.example.com")
    assert tcp is lst.default_filter_chain or tcp == lst.default_filter_chain


def test_cidr_addresses_share_the_wildcard_by_prefix_ranges() -> None:
    entries = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: nets, namespace: demo}
spec:
  hosts: [net-a.internal]
  addresses: [192.168.10.0/24]
  ports: [{number: 9000, name: tcp, protocol: TCP}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: nets-b, namespace: demo}
spec:
  hosts: [net-b.internal]
  addresses: [192.168.20.0/24]
  ports: [{number: 9000, name: tcp, protocol: TCP}]
  resolution: NONE
"""
    mesh = build(join(CLIENT_POD, entries), CLIENT)
    assert "0.0.0.0_9000" in mesh.names
    _, a = outbound_call(mesh.listeners, "192.168.10.4", 9000)
    _, b = outbound_call(mesh.listeners, "192.168.20.4", 9000)
    _, other = outbound_call(mesh.listeners, "192.168.30.4", 9000)
    assert target(a) == Target("tcp", "outbound|9000||net-a.internal")
    assert target(b) == Target("tcp", "outbound|9000||net-b.internal")
    assert target(other) == Target("tcp", "PassthroughCluster")
    prefixes = [
        (r.address_prefix, r.prefix_len.value)
        for c in mesh.listener("0.0.0.0_9000").filter_chains
        for r in c.filter_chain_match.prefix_ranges
    ]
    assert prefixes == [("192.168.10.0", 24), ("192.168.20.0", 24)]


def test_sniffed_port_gets_its_own_vip_listener_and_route() -> None:
    mesh = build(
        join(CLIENT_POD, service("echo", "[{name: web, port: 7000}]", "10.96.0.7")), CLIENT
    )
    listener, http = outbound_call(mesh.listeners, "10.96.0.7", 7000, **HTTP_ALPN)
    assert listener == "10.96.0.7_7000"
    # Istio names the route of a sniffed service on its VIP `<host>:<port>`.
    assert target(http) == Target("rds", "echo.demo.svc.cluster.local:7000")
    _, tcp = outbound_call(mesh.listeners, "10.96.0.7", 7000)
    assert target(tcp) == Target("tcp", "outbound|7000||echo.demo.svc.cluster.local")
    lst = mesh.listener("10.96.0.7_7000")
    assert [f.name for f in lst.listener_filters] == ["envoy.filters.listener.http_inspector"]
    http_match = lst.filter_chains[0].filter_chain_match
    assert list(http_match.application_protocols) == ["http/1.1", "h2c"]
    assert http_match.transport_protocol == "raw_buffer"


def test_sniffed_port_without_vip_shares_the_port_route() -> None:
    entries = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: demo}
spec:
  hosts: [api.example.com]
  ports: [{number: 7070, name: unknown}]
  resolution: DNS
"""
    mesh = build(join(CLIENT_POD, entries), CLIENT)
    _, http = outbound_call(mesh.listeners, "203.0.113.1", 7070, **HTTP_ALPN)
    assert target(http) == Target("rds", "7070")


def test_headless_tcp_service_gets_one_listener_per_endpoint() -> None:
    mesh = build(
        join(
            CLIENT_POD,
            service("kafka", "[{name: tcp, port: 9092}]", "None"),
            pod("kafka-0", "10.1.0.20", "app: kafka"),
            pod("kafka-1", "10.1.0.21", "app: kafka"),
        ),
        CLIENT,
    )
    assert {"10.1.0.20_9092", "10.1.0.21_9092"} <= set(mesh.names)
    assert "0.0.0.0_9092" not in mesh.names
    _, chain = outbound_call(mesh.listeners, "10.1.0.21", 9092)
    assert target(chain) == Target("tcp", "outbound|9092||kafka.demo.svc.cluster.local")


def test_headless_service_skips_the_proxys_own_ip() -> None:
    mesh = build(
        join(
            CLIENT_POD,
            service("peers", "[{name: tcp, port: 7946}]", "None", selector="app: sleep"),
        ),
        CLIENT,
    )
    assert "10.1.0.9_7946" not in mesh.names


def test_mongo_never_shares_a_port_with_http() -> None:
    entries = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: mongo, namespace: demo}
spec:
  hosts: [mongo.example.com]
  ports: [{number: 8080, name: mongo, protocol: MONGO}]
  resolution: DNS
"""
    mesh = build(
        join(CLIENT_POD, service("web", "[{name: http, port: 8080}]", "10.96.0.1"), entries),
        CLIENT,
    )
    # Services are placed in hostname order: mongo.example.com came first, so the HTTP
    # service is refused rather than putting an HTTP inspector in front of a server-first
    # protocol.
    lst = mesh.listener("0.0.0.0_8080")
    assert not lst.listener_filters
    _, chain = outbound_call(mesh.listeners, "10.96.0.1", 8080, **HTTP_ALPN)
    assert target(chain) == Target("tcp", "outbound|8080||mongo.example.com")


def test_registry_only_blackholes_unknown_traffic_on_service_ports() -> None:
    mesh_config = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    outboundTrafficPolicy: {mode: REGISTRY_ONLY}
"""
    mesh = build(
        join(mesh_config, CLIENT_POD, service("web", "[{name: http, port: 8080}]", "10.96.0.1")),
        CLIENT,
    )
    _, chain = outbound_call(mesh.listeners, "10.96.0.1", 8080)
    assert target(chain) == Target("tcp", "BlackHoleCluster")


def test_interception_none_binds_loopback_for_real() -> None:
    mesh = build(
        join(
            CLIENT_POD,
            service("web", "[{name: http, port: 8080}]", "10.96.0.1"),
            service("db", "[{name: tcp, port: 5432}]", "10.96.0.5"),
            service("echo", "[{name: web, port: 7000}]", "10.96.0.7"),
        ),
        CLIENT,
        intercept=False,
    )
    assert mesh.names == ["127.0.0.1_5432", "127.0.0.1_7000", "127.0.0.1_8080"]
    for lst in mesh.listeners:
        assert not lst.HasField("bind_to_port")  # unset: Envoy binds (Istio leaves it unset)
        assert lst.address.socket_address.address == "127.0.0.1"
    web = mesh.listener("127.0.0.1_8080")
    assert len(web.filter_chains) == 1 and not web.filter_chains[0].HasField("filter_chain_match")
    assert target(web.filter_chains[0]) == Target("rds", "8080")
    echo = mesh.listener("127.0.0.1_7000")
    assert target(echo.filter_chains[0]) == Target("rds", "echo.demo.svc.cluster.local:7000")


def test_sidecar_egress_hosts_limit_the_listeners() -> None:
    sidecar = """\
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: demo}
spec:
  egress:
  - hosts: ["./web.demo.svc.cluster.local"]
"""
    mesh = build(
        join(
            CLIENT_POD,
            sidecar,
            service("web", "[{name: http, port: 8080}]", "10.96.0.1"),
            service("db", "[{name: tcp, port: 5432}]", "10.96.0.5"),
        ),
        CLIENT,
    )
    assert "0.0.0.0_8080" in mesh.names
    assert "10.96.0.5_5432" not in mesh.names


def test_generation_is_deterministic_and_names_are_unique() -> None:
    text = join(
        CLIENT_POD,
        service("web", "[{name: http, port: 8080}, {name: tcp, port: 9000}]", "10.96.0.1"),
        service("api", "[{name: grpc, port: 8080}, {name: web, port: 7000}]", "10.96.0.2"),
        service("db", "[{name: tcp, port: 9000}]", "10.96.0.5"),
    )
    first, second = build(text, CLIENT), build(text, CLIENT)
    assert [x.SerializeToString(deterministic=True) for x in first.listeners] == [
        x.SerializeToString(deterministic=True) for x in second.listeners
    ]
    assert first.names == sorted(first.names)
    assert len(set(first.names)) == len(first.names)
    addresses = [
        (x.address.socket_address.address, x.address.socket_address.port_value)
        for x in first.listeners
    ]
    assert len(set(addresses)) == len(addresses)


def test_external_name_services_are_aliases_without_listeners() -> None:
    alias = """\
apiVersion: v1
kind: Service
metadata: {name: legacy-db, namespace: demo}
spec:
  type: ExternalName
  externalName: db.example.com
  ports: [{name: tcp, port: 5432}]
"""
    mesh = build(join(CLIENT_POD, alias), CLIENT)
    assert not any(n.endswith("_5432") for n in mesh.names)


def test_chain_conflicts_compare_masked_networks_and_ignore_wildcard_sni() -> None:
    assert ChainOpts(destination_cidrs=("1.2.3.4/8",)).conflicts_with(
        ChainOpts(destination_cidrs=("1.5.6.7/8",))
    )
    assert not ChainOpts(destination_cidrs=("10.0.0.0/8",)).conflicts_with(
        ChainOpts(destination_cidrs=("10.0.0.0/16",))
    )
    assert ChainOpts(sni_hosts=("a.com", "*")).conflicts_with(ChainOpts(sni_hosts=("a.com",)))
    assert ChainOpts(sni_hosts=("*",)).is_match_all()


def test_ipv6_proxy_uses_ipv6_wildcards() -> None:
    v6_pod = CLIENT_POD.replace("podIP: 10.1.0.9", "podIP: fd00::9")
    mesh = build(join(v6_pod, service("web", "[{name: http, port: 8080}]", "fd00:96::1")), CLIENT)
    assert {"::_8080", "virtualInbound", "virtualOutbound"} <= set(mesh.names)
    assert mesh.listener("virtualOutbound").address.socket_address.address == "::"


def test_a_gateway_service_on_the_proxys_own_ports_leaves_lds_acceptable() -> None:
    # an installed ingress gateway's Service: no cluster IP in the store, status-port 15021
    ports = (
        "[{name: status-port, port: 15021}, {name: http2, port: 80}, {name: http-m, port: 15090}]"
    )
    mesh = build(join(CLIENT_POD, service("istio-ingressgateway", ports, "None")), CLIENT)
    assert not {"0.0.0.0_15021", "0.0.0.0_15090"} & set(mesh.names)
    assert "0.0.0.0_80" in mesh.names
