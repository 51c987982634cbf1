"""Cluster generation: Istio's defaults, DestinationRule policy, ServiceEntry resolutions, TLS."""

from __future__ import annotations

from typing import Any

from meshpilot.model.proxy import ProxyType
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.output import message_to_dict
from tests.conftest import proxy_for, push_from_text

CLIENT = """\
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: shop, labels: {app: client}}
spec: {serviceAccountName: client}
status: {podIP: 10.9.0.1}
"""

SERVICE = """\
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec:
  clusterIP: 10.96.0.1
  selector: {app: api}
  ports: [{name: http, port: 80, targetPort: 8080}, {name: grpc, port: 9090}]
---
apiVersion: v1
kind: Pod
metadata: {name: api-0, namespace: shop, labels: {app: api, version: v1}}
spec: {serviceAccountName: api-sa}
status: {podIP: 10.9.0.2}
"""


def clusters(
    text: str, proxy: str = "client.shop", kind: ProxyType = ProxyType.SIDECAR
) -> dict[str, dict[str, Any]]:
    loaded, push = push_from_text(text)
    assert not loaded.errors, [str(d) for d in loaded.errors]
    config = generate_proxy_config(push, proxy_for(push, proxy, kind))
    return {c.name: message_to_dict(c) for c in config.clusters}


def test_default_outbound_cluster_is_istios() -> None:
    c = clusters(CLIENT + SERVICE)["outbound|80||api.shop.svc.cluster.local"]
    assert c["type"] == "EDS" and c["lb_policy"] == "LEAST_REQUEST"
    assert c["connect_timeout"] == "10s"
    assert c["eds_cluster_config"] == {
        "eds_config": {"ads": {}, "initial_fetch_timeout": "0s", "resource_api_version": "V3"},
        "service_name": "outbound|80||api.shop.svc.cluster.local",
    }
    [thresholds] = c["circuit_breakers"]["thresholds"]
    assert thresholds["max_requests"] == 4294967295 and thresholds["track_remaining"]
    assert c["metadata"]["filter_metadata"]["istio"]["services"] == [
        {"host": "api.shop.svc.cluster.local", "name": "api", "namespace": "shop"}
    ]
    assert "typed_extension_protocol_options" not in c  # HTTP/1.1 port


def test_grpc_port_gets_http2_and_special_clusters_exist() -> None:
    got = clusters(CLIENT + SERVICE)
    options = got["outbound|9090||api.shop.svc.cluster.local"]["typed_extension_protocol_options"]
    packed = options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
    assert packed["explicit_http_config"] == {"http2_protocol_options": {}}
    assert got["BlackHoleCluster"]["type"] == "STATIC"
    assert got["PassthroughCluster"]["lb_policy"] == "CLUSTER_PROVIDED"
    inbound_pt = got["InboundPassthroughCluster"]["upstream_bind_config"]["source_address"]
    assert inbound_pt == {"address": "127.0.0.6", "port_value": 0}


def test_destination_rule_policy_subsets_and_port_level() -> None:
    dr = """\
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: api, namespace: shop}
spec:
  host: api
  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN}
    connectionPool:
      tcp: {maxConnections: 7, connectTimeout: 250ms}
      http: {http1MaxPendingRequests: 3, maxRequestsPerConnection: 1, idleTimeout: 30s}
    outlierDetection: {consecutive5xxErrors: 0, consecutiveGatewayErrors: 4, interval: 5s,
                       baseEjectionTime: 1m, maxEjectionPercent: 20, minHealthPercent: 10}
    portLevelSettings:
    - port: {number: 9090}
      loadBalancer: {consistentHash: {httpHeaderName: x-user}}
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy: {loadBalancer: {simple: RANDOM}}
"""
    got = clusters(CLIENT + SERVICE + dr)
    http = got["outbound|80||api.shop.svc.cluster.local"]
    assert "lb_policy" not in http  # ROUND_ROBIN is Envoy's zero value
    assert http["connect_timeout"] == "0.250s"
    [t] = http["circuit_breakers"]["thresholds"]
    assert (t["max_connections"], t["max_pending_requests"]) == (7, 3)
    od = http["outlier_detection"]
    assert od["consecutive_5xx"] == 0 and od["enforcing_consecutive_5xx"] == 0
    assert od["consecutive_gateway_failure"] == 4
    assert od["enforcing_consecutive_gateway_failure"] == 100
    assert od["enforcing_success_rate"] == 0 and od["max_ejection_percent"] == 20
    assert http["common_lb_config"]["healthy_panic_threshold"] == {"value": 10.0}
    common = http["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]["common_http_protocol_options"]
    assert common == {"idle_timeout": "30s", "max_requests_per_connection": 1}
    grpc = got["outbound|9090||api.shop.svc.cluster.local"]
    assert grpc["lb_policy"] == "RING_HASH"
    assert grpc["ring_hash_lb_config"] == {"minimum_ring_size": "1024"}
    subset = got["outbound|80|v1|api.shop.svc.cluster.local"]
    assert subset["lb_policy"] == "RANDOM" and subset["connect_timeout"] == "0.250s"
    assert subset["metadata"]["filter_metadata"]["istio"]["subset"] == "v1"
    assert subset["metadata"]["filter_metadata"]["istio"]["config"] == (
        "/apis/networking.istio.io/v1/namespaces/shop/destination-rule/api"
    )


def test_service_entry_resolutions() -> None:
    entries = """\
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: shop}
spec:
  hosts: [dns.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: rr, namespace: shop}
spec:
  hosts: [rr.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS_ROUND_ROBIN
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: any, namespace: shop}
spec:
  hosts: ["*.example.org"]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: fixed, namespace: shop}
spec:
  hosts: [db.internal]
  addresses: [192.168.0.10]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 192.168.0.10}]
"""
    got = clusters(CLIENT + entries)
    dns = got["outbound|443||dns.example.com"]
    assert dns["type"] == "STRICT_DNS" and dns["dns_lookup_family"] == "V4_ONLY"
    assert dns["respect_dns_ttl"] and dns["dns_refresh_rate"] == "60s"
    [group] = dns["load_assignment"]["endpoints"]
    assert group["lb_endpoints"][0]["endpoint"]["address"]["socket_address"] == {
        "address": "dns.example.com",
        "port_value": 443,
    }
    assert dns["metadata"]["filter_metadata"]["istio"]["external"] is True
    assert got["outbound|443||rr.example.com"]["type"] == "LOGICAL_DNS"
    wildcard = got["outbound|443||*.example.org"]
    assert (wildcard["type"], wildcard["lb_policy"]) == ("ORIGINAL_DST", "CLUSTER_PROVIDED")
    assert got["outbound|5432||db.internal"]["type"] == "EDS"


def _tls(cluster: dict[str, Any]) -> dict[str, Any]:
    socket: dict[str, Any] = cluster["transport_socket"]["typed_config"]
    return socket


def test_destination_rule_tls_modes() -> None:
    text = (
        CLIENT
        + SERVICE
        + """\
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: api, namespace: shop}
spec:
  host: api
  trafficPolicy:
    portLevelSettings:
    - port: {number: 80}
      tls: {mode: ISTIO_MUTUAL}
    - port: {number: 9090}
      tls: {mode: MUTUAL, credentialName: api-client, sni: api.internal}
  subsets:
  - name: plain
    trafficPolicy: {tls: {mode: DISABLE}}
"""
    )
    got = clusters(text)
    istio = _tls(got["outbound|80||api.shop.svc.cluster.local"])
    assert istio["sni"] == "outbound_.80_._.api.shop.svc.cluster.local"
    common = istio["common_tls_context"]
    assert common["alpn_protocols"] == ["istio-peer-exchange", "istio"]  # ALPNInMeshWithMxc
    assert common["tls_certificate_sds_secret_configs"][0]["name"] == "default"
    validation = common["combined_validation_context"]
    assert validation["validation_context_sds_secret_config"]["name"] == "ROOTCA"
    assert validation["default_validation_context"]["match_typed_subject_alt_names"] == [
        {"san_type": "URI", "matcher": {"exact": "spiffe://cluster.local/ns/shop/sa/api-sa"}}
    ]
    mutual = _tls(got["outbound|9090||api.shop.svc.cluster.local"])
    assert mutual["sni"] == "api.internal"
    cert = mutual["common_tls_context"]["tls_certificate_sds_secret_configs"][0]
    assert cert == {
        "name": "kubernetes://api-client",
        "sds_config": {"ads": {}, "resource_api_version": "V3"},
    }
    assert mutual["common_tls_context"]["alpn_protocols"] == ["h2"]
    assert "transport_socket" not in got["outbound|80|plain|api.shop.svc.cluster.local"]


def test_simple_tls_without_ca_verifies_with_system_roots() -> None:
    text = (
        CLIENT
        + """\
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: shop}
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: https, protocol: HTTPS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ext, namespace: shop}
spec:
  host: api.example.com
  trafficPolicy: {tls: {mode: SIMPLE, sni: api.example.com}}
"""
    )
    tls = _tls(clusters(text)["outbound|443||api.example.com"])
    validation = tls["common_tls_context"]["combined_validation_context"]
    assert validation["validation_context_sds_secret_config"]["name"] == "file-root:system"
    assert "tls_certificate_sds_secret_configs" not in tls["common_tls_context"]


def test_inbound_cluster_delivers_from_127_0_0_6_or_localhost() -> None:
    got = clusters(CLIENT + SERVICE, proxy="api-0.shop")
    inbound = got["inbound|8080||"]
    assert (inbound["type"], inbound["lb_policy"]) == ("ORIGINAL_DST", "CLUSTER_PROVIDED")
    assert inbound["upstream_bind_config"]["source_address"]["address"] == "127.0.0.6"
    assert inbound["cleanup_interval"] == "9223372035s"
    assert "inbound|9090||" in got
    mesh = (
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\n"
    )
    mesh += "data:\n  mesh: 'inboundTrafficPolicy: {mode: LOCALHOST}'\n"
    local = clusters(CLIENT + SERVICE + mesh, proxy="api-0.shop")["inbound|8080||"]
    assert local["type"] == "STATIC" and "upstream_bind_config" not in local
    address = local["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
    assert address["socket_address"] == {"address": "127.0.0.1", "port_value": 8080}


def test_gateway_gets_no_inbound_or_passthrough_clusters() -> None:
    got = clusters(CLIENT + SERVICE, kind=ProxyType.ROUTER)
    assert "PassthroughCluster" not in got and "InboundPassthroughCluster" not in got
    assert "BlackHoleCluster" in got and "outbound|80||api.shop.svc.cluster.local" in got
