"""`match` fields against single objects, hits and misses, as Istio's envoyfilter package
reads them (JSON or proto field names)."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2

from meshpilot.xds.patch.matching import (
    chain_matches,
    cluster_matches,
    listener_matches,
    route_config_matches,
    route_matches,
    vhost_matches,
)


def _chain(**fcm: object) -> listener_components_pb2.FilterChain:
    chain = listener_components_pb2.FilterChain(name="c")
    for key, value in fcm.items():
        if key == "destination_port":
            chain.filter_chain_match.destination_port.value = int(value)  # type: ignore[call-overload]
        elif isinstance(value, list):
            getattr(chain.filter_chain_match, key).extend(value)
        else:
            setattr(chain.filter_chain_match, key, value)
    return chain


def test_listener_port_name_and_listener_filter() -> None:
    lst = listener_pb2.Listener(name="0.0.0.0_9080")
    lst.address.socket_address.port_value = 9080
    lst.listener_filters.add(name="envoy.filters.listener.http_inspector")
    assert listener_matches(lst, {"portNumber": 9080})
    assert not listener_matches(lst, {"port_number": 80})
    assert listener_matches(lst, {"name": "0.0.0.0_9080"})
    assert not listener_matches(lst, {"name": "virtualOutbound"})
    assert listener_matches(lst, {"listenerFilter": "envoy.listener.http_inspector"})  # old name
    assert not listener_matches(lst, {"listenerFilter": "envoy.filters.listener.tls_inspector"})


def test_virtual_listeners_match_a_port_by_their_chains() -> None:
    inbound = listener_pb2.Listener(name="virtualInbound")
    inbound.address.socket_address.port_value = 15006
    inbound.filter_chains.append(_chain(destination_port=9080, transport_protocol="tls"))
    assert listener_matches(inbound, {"portNumber": 9080})
    assert not listener_matches(inbound, {"portNumber": 8080})
    assert chain_matches(inbound, inbound.filter_chains[0], {"portNumber": 9080})
    assert not chain_matches(inbound, inbound.filter_chains[0], {"portNumber": 8080})


def test_filter_chain_sni_transport_alpn_destination_port() -> None:
    lst = listener_pb2.Listener(name="x")
    chain = _chain(
        server_names=["a.example.com"],
        transport_protocol="tls",
        application_protocols=["istio", "h2"],
        destination_port=8443,
    )
    hit = {"sni": "a.example.com", "transportProtocol": "tls", "applicationProtocols": "h2,istio"}
    assert chain_matches(lst, chain, {"filterChain": {**hit, "destinationPort": 8443}})
    for miss in (
        {"sni": "b.example.com"},
        {"transportProtocol": "raw_buffer"},
        {"applicationProtocols": "istio,http/1.1"},
        {"destinationPort": 9443},
        {"name": "other"},
    ):
        assert not chain_matches(lst, chain, {"filterChain": miss}), miss


def test_route_configuration_names_of_sidecars_and_gateways() -> None:
    assert route_config_matches("9080", False, {"portNumber": 9080})
    assert route_config_matches("inbound|9080||", False, {"portNumber": 9080})
    assert not route_config_matches("80", False, {"portNumber": 9080})
    https = "https.443.https.bookinfo-gateway.default"
    match = {"portNumber": 443, "portName": "https", "gateway": "default/bookinfo-gateway"}
    assert route_config_matches(https, True, match)
    assert not route_config_matches(https, True, {**match, "portName": "http"})
    assert not route_config_matches(https, True, {**match, "gateway": "default/other"})
    assert route_config_matches("http.8080", True, {"portNumber": 8080})
    assert not route_config_matches("http.8080", True, {"name": "http.80"})


def test_virtual_host_and_route_by_name_and_action() -> None:
    vhost = route_components_pb2.VirtualHost(name="a:80", domains=["a", "a.ns"])
    route = route_components_pb2.Route(name="r")
    route.route.cluster = "c"
    assert vhost_matches(vhost, {"vhost": {"name": "a:80"}})
    assert not vhost_matches(vhost, {"vhost": {"name": "b:80"}})
    assert vhost_matches(vhost, {"vhost": {"domainName": "a.ns"}})
    assert route_matches(route, {"vhost": {"route": {"name": "r", "action": "ROUTE"}}})
    assert not route_matches(route, {"vhost": {"route": {"action": "REDIRECT"}}})
    assert not route_matches(route, {"vhost": {"route": {"name": "s"}}})


def test_clusters_by_service_subset_port_or_name() -> None:
    cluster = cluster_pb2.Cluster(name="outbound|9080|v1|reviews.default.svc.cluster.local")
    service = "reviews.default.svc.cluster.local"
    assert cluster_matches(cluster, {"service": service, "subset": "v1", "portNumber": 9080})
    assert not cluster_matches(cluster, {"service": "ratings.default.svc.cluster.local"})
    assert not cluster_matches(cluster, {"subset": "v2"})
    assert not cluster_matches(cluster, {"portNumber": 80})
    assert cluster_matches(cluster, {"name": cluster.name})
    assert not cluster_matches(cluster_pb2.Cluster(name="inbound|9080||"), {"service": service})
