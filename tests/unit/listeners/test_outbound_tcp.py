"""Outbound TCP and TLS chains: VirtualService `tcp` and `tls` routes, SNI matching, and the
DestinationRule settings copied into tcp_proxy."""

from __future__ import annotations

from tests.unit.listeners.lds_helpers import Target, build, outbound_call, target, tcp_proxy_of
from tests.unit.listeners.meshes import CLIENT, CLIENT_POD, join, service

DB = service("db", "[{name: tcp, port: 5432}]", "10.96.0.5")
DB_V = """\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: db, namespace: demo}
spec:
  host: db
  subsets:
  - {name: primary, labels: {role: primary}}
  - {name: replica, labels: {role: replica}}
"""


def _vs(tcp_routes: str) -> str:
    return f"""\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: db, namespace: demo}}
spec:
  hosts: [db]
  tcp:
{tcp_routes}"""


def test_vs_tcp_route_with_weights_becomes_weighted_clusters() -> None:
    vs = _vs(
        """\
  - route:
    - {destination: {host: db, subset: primary}, weight: 90}
    - {destination: {host: db, subset: replica}, weight: 10}
    - {destination: {host: db, subset: never}, weight: 0}
"""
    )
    mesh = build(join(CLIENT_POD, DB, DB_V, vs), CLIENT)
    _, chain = outbound_call(mesh.listeners, "10.96.0.5", 5432)
    assert target(chain) == Target(
        "weighted",
        "db.demo",  # Istio names weighted tcp_proxy stats <vs name>.<vs namespace>
        {
            "outbound|5432|primary|db.demo.svc.cluster.local": 90,
            "outbound|5432|replica|db.demo.svc.cluster.local": 10,
        },
    )
    assert chain is not None
    assert chain.metadata.filter_metadata["istio"].fields["config"].string_value == (
        "/apis/networking.istio.io/v1/namespaces/demo/virtual-service/db"
    )


def test_vs_tcp_single_destination_to_another_service_and_port() -> None:
    vs = _vs(
        "  - route: [{destination: {host: backup.demo.svc.cluster.local, port: {number: 6000}}}]\n"
    )
    backup = service("backup", "[{name: tcp, port: 6000}, {name: tcp-b, port: 6001}]", "10.96.0.6")
    mesh = build(join(CLIENT_POD, DB, backup, vs), CLIENT)
    _, chain = outbound_call(mesh.listeners, "10.96.0.5", 5432)
    assert target(chain) == Target("tcp", "outbound|6000||backup.demo.svc.cluster.local")


def test_vs_tcp_match_on_source_labels_and_port() -> None:
    vs = _vs(
        """\
  - match: [{sourceLabels: {app: other}}]
    route: [{destination: {host: db, subset: replica}}]
  - match: [{port: 5432, sourceLabels: {app: sleep}}]
    route: [{destination: {host: db, subset: primary}}]
"""
    )
    mesh = build(join(CLIENT_POD, DB, DB_V, vs), CLIENT)
    _, chain = outbound_call(mesh.listeners, "10.96.0.5", 5432)
    assert target(chain) == Target("tcp", "outbound|5432|primary|db.demo.svc.cluster.local")


def test_vs_tcp_destination_subnets_split_then_service_default() -> None:
    shared = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db-net, namespace: demo}
spec:
  hosts: [db.internal]
  addresses: [10.96.0.0/24]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db-net, namespace: demo}
spec:
  hosts: [db.internal]
  tcp:
  - match: [{destinationSubnets: [10.96.0.5/32]}]
    route: [{destination: {host: db.internal, subset: replica}}]
"""
    mesh = build(join(CLIENT_POD, shared), CLIENT)
    _, exact = outbound_call(mesh.listeners, "10.96.0.5", 5432)
    _, rest = outbound_call(mesh.listeners, "10.96.0.77", 5432)
    _, outside = outbound_call(mesh.listeners, "10.97.0.1", 5432)
    assert target(exact) == Target("tcp", "outbound|5432|replica|db.internal")
    assert target(rest) == Target("tcp", "outbound|5432||db.internal")
    assert target(outside) == Target("tcp", "PassthroughCluster")


def test_tls_service_with_vip_proxies_without_sni() -> None:
    mesh = build(
        join(CLIENT_POD, service("secure", "[{name: https, port: 443}]", "10.96.0.9")), CLIENT
    )
    _, chain = outbound_call(mesh.listeners, "10.96.0.9", 443, transport="tls", sni="anything")
    assert target(chain) == Target("tcp", "outbound|443||secure.demo.svc.cluster.local")
    assert not mesh.listener("10.96.0.9_443").listener_filters


SE_TLS = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: demo}
spec:
  hosts: [api.example.com, cdn.example.com]
  ports: [{number: 443, name: https, protocol: HTTPS}]
  resolution: DNS
"""


def test_tls_services_without_vip_are_told_apart_by_sni() -> None:
    mesh = build(join(CLIENT_POD, SE_TLS), CLIENT)
    lst = mesh.listener("0.0.0.0_443")
    assert [f.name for f in lst.listener_filters] == ["envoy.filters.listener.tls_inspector"]
    ip = "203.0.113.5"
    _, api = outbound_call(mesh.listeners, ip, 443, transport="tls", sni="api.example.com")
    _, cdn = outbound_call(mesh.listeners, ip, 443, transport="tls", sni="cdn.example.com")
    _, other = outbound_call(mesh.listeners, ip, 443, transport="tls", sni="evil.example.org")
    assert target(api) == Target("tcp", "outbound|443||api.example.com")
    assert target(cdn) == Target("tcp", "outbound|443||cdn.example.com")
    assert target(other) == Target("tcp", "PassthroughCluster")


def test_vs_tls_routes_match_sni_hosts() -> None:
    vs = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: tls-split, namespace: demo}
spec:
  hosts: [api.example.com]
  tls:
  - match: [{sniHosts: [api.example.com], port: 443}]
    route: [{destination: {host: cdn.example.com}}]
  - match: [{sniHosts: [api.example.com]}]
    route: [{destination: {host: api.example.com}}]
"""
    mesh = build(join(CLIENT_POD, SE_TLS, vs), CLIENT)
    _, chain = outbound_call(
        mesh.listeners, "203.0.113.5", 443, transport="tls", sni="api.example.com"
    )
    # The second match has the same SNI: unreachable, so only the first is built.
    assert target(chain) == Target("tcp", "outbound|443||cdn.example.com")
    sni_chains = [
        c
        for c in mesh.listener("0.0.0.0_443").filter_chains
        if list(c.filter_chain_match.server_names) == ["api.example.com"]
    ]
    assert len(sni_chains) == 1


def test_vs_tls_wildcard_sni() -> None:
    vs = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: wild, namespace: demo}
spec:
  hosts: ["*.example.com"]
  tls:
  - match: [{sniHosts: ["*.example.com"]}]
    route: [{destination: {host: api.example.com}}]
"""
    mesh = build(join(CLIENT_POD, SE_TLS, vs), CLIENT)
    _, chain = outbound_call(
        mesh.listeners, "203.0.113.5", 443, transport="tls", sni="img.example.com"
    )
    assert target(chain) == Target("tcp", "outbound|443||api.example.com")


def test_destination_rule_tcp_settings_reach_tcp_proxy() -> None:
    dr = """\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: db, namespace: demo}
spec:
  host: db.demo.svc.cluster.local
  trafficPolicy:
    connectionPool:
      tcp: {idleTimeout: 30m, maxConnectionDuration: 2h}
    loadBalancer:
      consistentHash: {useSourceIp: true}
"""
    mesh = build(join(CLIENT_POD, DB, dr), CLIENT)
    _, chain = outbound_call(mesh.listeners, "10.96.0.5", 5432)
    assert chain is not None
    proxy = tcp_proxy_of(chain)
    assert proxy is not None
    assert proxy.idle_timeout.ToSeconds() == 1800
    assert proxy.max_downstream_connection_duration.ToSeconds() == 7200
    assert proxy.hash_policy[0].HasField("source_ip")


def test_vs_for_other_gateways_does_not_apply_to_sidecars() -> None:
    vs = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: demo}
spec:
  hosts: [db]
  gateways: [istio-system/ingress]
  tcp:
  - route: [{destination: {host: db, subset: replica}}]
"""
    mesh = build(join(CLIENT_POD, DB, DB_V, vs), CLIENT)
    _, chain = outbound_call(mesh.listeners, "10.96.0.5", 5432)
    assert target(chain) == Target("tcp", "outbound|5432||db.demo.svc.cluster.local")
