"""Sidecar `ingress` listeners and egress listeners with a port, as a user reads them in
the generated listeners and clusters."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from envoy.config.cluster.v3 import cluster_pb2

from meshpilot.xds.generate import generate_proxy_config
from tests.conftest import proxy_for, push_from_paths

INPUTS = Path(__file__).parents[1] / "golden" / "inputs"


def test_ingress_replaces_service_ports_and_delivers_to_default_endpoints() -> None:
    _, push = push_from_paths([INPUTS / "sidecar-ingress.yaml"])
    config = generate_proxy_config(push, proxy_for(push, "ledger-6c7d8e9f0-aaaaa.bank"))
    inbound = next(lst for lst in config.listeners if lst.name == "virtualInbound")
    ports = {c.filter_chain_match.destination_port.value for c in inbound.filter_chains}
    assert {9080, 9090, 9443} <= ports
    assert 8080 not in ports  # the Service's target port is not served any more
    clusters = {c.name: c for c in config.clusters if c.name.startswith("inbound|")}
    assert sorted(clusters) == [
        "inbound|7070||",
        "inbound|9080||",
        "inbound|9090||",
        "inbound|9443||",
    ]
    to_pod = clusters["inbound|9443||"].load_assignment.endpoints[0].lb_endpoints[0]
    assert to_pod.endpoint.address.socket_address.address == "10.60.0.1"  # 0.0.0.0 = pod IP
    to_socket = clusters["inbound|9090||"].load_assignment.endpoints[0].lb_endpoints[0]
    assert to_socket.endpoint.address.pipe.path == "/var/run/ledger.sock"
    assert clusters["inbound|9090||"].circuit_breakers.thresholds[0].max_connections.value == 100
    bound = next(lst for lst in config.listeners if lst.name == "0.0.0.0_7070")
    assert not bound.HasField("bind_to_port")  # captureMode NONE: bound for real


def test_ingress_without_capture_binds_every_entry() -> None:
    _, push = push_from_paths([INPUTS / "sidecar-ingress.yaml"])
    proxy = replace(proxy_for(push, "ledger-6c7d8e9f0-aaaaa.bank"), intercept=False)
    config = generate_proxy_config(push, proxy)
    names = {lst.name for lst in config.listeners}
    assert {"0.0.0.0_9080", "0.0.0.0_9090", "0.0.0.0_9443", "0.0.0.0_7070"} <= names
    assert "virtualInbound" not in names


def test_egress_port_listener_takes_only_its_hosts() -> None:
    _, push = push_from_paths([INPUTS / "sidecar-egress-port.yaml"])
    config = generate_proxy_config(push, proxy_for(push, "client-7d8e9f0a1-aaaaa.team-x"))
    bound = next(lst for lst in config.listeners if lst.name == "127.0.0.1_5432")
    assert not bound.HasField("bind_to_port")
    assert len(bound.filter_chains) == 1
    assert "db.team-y" in str(bound.filter_chains[0].filters[0].typed_config.value)
    assert not any(
        c.type == cluster_pb2.Cluster.ORIGINAL_DST and "db" in c.name for c in config.clusters
    )
