"""Outbound clusters and endpoints under automatic mTLS: which transport a client sidecar
uses towards each destination, as Istio decides it (DestinationRule TLS first, then the
destination's PeerAuthentication, per endpoint by its sidecar label)."""

from __future__ import annotations

from typing import Any

from meshpilot.xds.generate import generate_proxy_config
from tests.conftest import proxy_for, push_from_text
from tests.unit.mtls.meshes import BASE, CLIENT, peer_authn

API = "{app: api}"
HTTP_80 = "outbound|80||api.shop.svc.cluster.local"
TCP_9000 = "outbound|9000||api.shop.svc.cluster.local"
SPIFFE_API = "spiffe://cluster.local/ns/shop/sa/api"


def _config(extra: str = "") -> dict[str, Any]:
    loaded, push = push_from_text(BASE + extra)
    assert not loaded.errors, [str(d) for d in loaded.errors]
    return generate_proxy_config(push, proxy_for(push, CLIENT)).to_dict()


def _clusters(extra: str = "") -> dict[str, dict[str, Any]]:
    return _clusters_of(_config(extra))


def _transport(cluster: dict[str, Any]) -> str:
    if "transport_socket_matches" in cluster:
        return "auto"
    if "transport_socket" in cluster:
        return "tls"
    return "plain"


def _endpoint_tls_modes(extra: str, cluster: str) -> list[str | None]:
    assignments = {a["cluster_name"]: a for a in _config(extra)["endpoints"]}
    return [
        lb.get("metadata", {})
        .get("filter_metadata", {})
        .get("envoy.transport_socket_match", {})
        .get("tlsMode")
        for group in assignments[cluster]["endpoints"]
        for lb in group["lb_endpoints"]
    ]


def test_mesh_services_get_istio_and_plaintext_socket_matches() -> None:
    cluster = _clusters()[HTTP_80]
    istio, disabled = cluster["transport_socket_matches"]
    assert istio["name"] == "tlsMode-istio" and istio["match"] == {"tlsMode": "istio"}
    assert disabled["name"] == "tlsMode-disabled" and disabled["match"] == {}
    assert disabled["transport_socket"]["name"] == "envoy.transport_sockets.raw_buffer"
    ctx = istio["transport_socket"]["typed_config"]
    assert ctx["sni"] == "outbound_.80_._.api.shop.svc.cluster.local"
    common = ctx["common_tls_context"]
    assert common["alpn_protocols"] == ["istio-peer-exchange", "istio"]
    assert common["tls_certificate_sds_secret_configs"][0]["name"] == "default"
    combined = common["combined_validation_context"]
    assert combined["validation_context_sds_secret_config"]["name"] == "ROOTCA"
    assert combined["default_validation_context"]["match_typed_subject_alt_names"] == [
        {"san_type": "URI", "matcher": {"exact": SPIFFE_API}}
    ]
    assert common["tls_params"] == {
        "tls_minimum_protocol_version": "TLSv1_2",
        "tls_maximum_protocol_version": "TLSv1_3",
    }
    # the sidecar's endpoints are marked for the tlsMode-istio match
    assert _endpoint_tls_modes("", HTTP_80) == ["istio"]


def test_http2_ports_offer_h2_after_istio() -> None:
    grpc = """\
---
apiVersion: v1
kind: Service
metadata: {name: rpc, namespace: shop}
spec:
  clusterIP: 10.96.7.9
  selector: {app: api}
  ports: [{name: grpc, port: 9090}]
"""
    cluster = _clusters(grpc)["outbound|9090||rpc.shop.svc.cluster.local"]
    ctx = cluster["transport_socket_matches"][0]["transport_socket"]["typed_config"]
    assert ctx["common_tls_context"]["alpn_protocols"] == ["istio-peer-exchange", "istio", "h2"]


def test_destination_rule_tls_wins_over_auto_mtls() -> None:
    rule = """\
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: api, namespace: shop}
spec:
  host: api
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL, sni: api.custom}
    portLevelSettings:
    - port: {number: 9000}
      tls: {mode: DISABLE}
"""
    clusters = _clusters(rule)
    forced = clusters[HTTP_80]
    assert _transport(forced) == "tls"  # no split by endpoint: always mTLS
    assert forced["transport_socket"]["typed_config"]["sni"] == "api.custom"
    assert _transport(clusters[TCP_9000]) == "plain"


def test_peer_authentication_disable_makes_clients_send_plaintext() -> None:
    # namespace-wide: the cluster has no mTLS at all
    assert _transport(_clusters(peer_authn("default", "shop", "DISABLE"))[HTTP_80]) == "plain"
    # mesh-wide DISABLE, but the namespace says STRICT
    both = peer_authn("default", "istio-system", "DISABLE") + peer_authn(
        "default", "shop", "STRICT"
    )
    assert _transport(_clusters(both)[HTTP_80]) == "auto"
    # workload or port level: the endpoint loses its tlsMode, so the plaintext match applies
    port_level = peer_authn("api", "shop", "STRICT", API, "{8080: {mode: DISABLE}}")
    assert _transport(_clusters(port_level)[HTTP_80]) == "auto"
    assert _endpoint_tls_modes(port_level, HTTP_80) == [None]
    assert _endpoint_tls_modes(port_level, TCP_9000) == ["istio"]


def _mesh(spec: str) -> str:
    return f"---\napiVersion: meshpilot.io/v1alpha1\nkind: MeshConfig\nspec: {spec}\n"


def test_auto_mtls_off_in_mesh_config() -> None:
    assert _transport(_clusters(_mesh("{enableAutoMtls: false}"))[HTTP_80]) == "plain"


def test_pods_without_a_sidecar_get_plaintext() -> None:
    no_sidecar = BASE.replace(
        "labels: {app: api, version: v1, security.istio.io/tlsMode: istio}",
        "labels: {app: api, version: v1}",
    )
    _, push = push_from_text(no_sidecar)
    config = generate_proxy_config(push, proxy_for(push, CLIENT)).to_dict()
    cla = next(a for a in config["endpoints"] if a["cluster_name"] == HTTP_80)
    metadata = cla["endpoints"][0]["lb_endpoints"][0].get("metadata", {})
    assert "envoy.transport_socket_match" not in metadata.get("filter_metadata", {})
    # the cluster still offers both: a sidecar may appear behind the service later
    assert _transport(_clusters_of(config)[HTTP_80]) == "auto"


def _clusters_of(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in config["clusters"]}


def test_external_and_passthrough_destinations_never_use_auto_mtls() -> None:
    extra = """\
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: pay, namespace: shop}
spec:
  hosts: [pay.example.com]
  location: MESH_EXTERNAL
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: api, namespace: shop}
spec:
  host: api
  trafficPolicy: {loadBalancer: {simple: PASSTHROUGH}}
"""
    clusters = _clusters(extra)
    assert _transport(clusters["outbound|443||pay.example.com"]) == "plain"
    assert _transport(clusters[HTTP_80]) == "plain"


def test_trust_domain_aliases_widen_the_accepted_identities() -> None:
    cluster = _clusters(_mesh("{trustDomainAliases: [old.example]}"))[HTTP_80]
    ctx = cluster["transport_socket_matches"][0]["transport_socket"]["typed_config"]
    sans = ctx["common_tls_context"]["combined_validation_context"]["default_validation_context"]
    assert [m["matcher"]["exact"] for m in sans["match_typed_subject_alt_names"]] == [
        SPIFFE_API,
        "spiffe://old.example/ns/shop/sa/api",
    ]
