"""virtualOutbound: the 15001 capture listener, its loop protection and its catch-all."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2

from meshpilot.xds.generate.listeners import generate_sidecar_listeners
from tests.unit.listeners.lds_helpers import Target, build, outbound_call, select_chain, target
from tests.unit.listeners.meshes import CLIENT, CLIENT_POD, join, service

REGISTRY_ONLY_MESH = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    outboundTrafficPolicy: {mode: REGISTRY_ONLY}
"""


def test_virtual_outbound_shape() -> None:
    mesh = build(CLIENT_POD, CLIENT)
    vo = mesh.listener("virtualOutbound")
    assert vo.address.socket_address.address == "0.0.0.0"
    assert vo.address.socket_address.port_value == 15001
    assert vo.use_original_dst.value is True
    assert vo.traffic_direction == base_pb2.OUTBOUND
    assert not vo.listener_filters and not vo.HasField("bind_to_port")
    # Istio keeps both chains in filter_chains (no default_filter_chain here).
    assert [c.name for c in vo.filter_chains] == [
        "virtualOutbound-blackhole",
        "virtualOutbound-catchall-tcp",
    ]
    assert not vo.HasField("default_filter_chain")


def test_unknown_destinations_pass_through_under_allow_any() -> None:
    mesh = build(CLIENT_POD, CLIENT)
    listener, chain = outbound_call(mesh.listeners, "93.184.216.34", 443, transport="tls")
    assert listener == "virtualOutbound"
    assert chain is not None and chain.name == "virtualOutbound-catchall-tcp"
    assert target(chain) == Target("tcp", "PassthroughCluster")


def test_connections_to_15001_itself_are_blackholed() -> None:
    mesh = build(CLIENT_POD, CLIENT)
    chain = select_chain(mesh.listener("virtualOutbound"), 15001, ip="10.1.0.9")
    assert chain is not None and chain.name == "virtualOutbound-blackhole"
    assert target(chain) == Target("tcp", "BlackHoleCluster")


def test_registry_only_mesh_blackholes_unknown_destinations() -> None:
    mesh = build(join(REGISTRY_ONLY_MESH, CLIENT_POD), CLIENT)
    _, chain = outbound_call(mesh.listeners, "93.184.216.34", 443)
    assert target(chain) == Target("tcp", "BlackHoleCluster")


def test_sidecar_outbound_policy_overrides_the_mesh() -> None:
    sidecar = """\
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: demo}
spec:
  outboundTrafficPolicy: {mode: ALLOW_ANY}
"""
    mesh = build(join(REGISTRY_ONLY_MESH, CLIENT_POD, sidecar), CLIENT)
    _, chain = outbound_call(mesh.listeners, "93.184.216.34", 443)
    assert target(chain) == Target("tcp", "PassthroughCluster")


def test_known_services_are_handed_off_not_caught() -> None:
    mesh = build(join(CLIENT_POD, service("db", "[{name: tcp, port: 5432}]", "10.96.0.5")), CLIENT)
    listener, chain = outbound_call(mesh.listeners, "10.96.0.5", 5432)
    assert listener == "10.96.0.5_5432"
    assert target(chain) == Target("tcp", "outbound|5432||db.demo.svc.cluster.local")


def test_tproxy_capture_listeners_are_transparent_and_inbound_keeps_the_source() -> None:
    """interceptionMode TPROXY (Istio: transparent virtual listeners, original_src with
    mark 1337 on virtualInbound, which istio-iptables' policy route matches)."""
    import dataclasses

    from envoy.extensions.filters.listener.original_src.v3 import original_src_pb2

    redirect = build(CLIENT_POD, CLIENT)
    tproxy = dataclasses.replace(redirect.proxy, tproxy=True)
    listeners = {lst.name: lst for lst in generate_sidecar_listeners(redirect.push, tproxy, None)}
    for name in ("virtualOutbound", "virtualInbound"):
        assert listeners[name].transparent.value is True
        assert not redirect.listener(name).HasField("transparent")
    filters = [f.name for f in listeners["virtualInbound"].listener_filters]
    assert filters[:2] == [
        "envoy.filters.listener.original_dst",
        "envoy.filters.listener.original_src",
    ]
    config = original_src_pb2.OriginalSrc()
    listeners["virtualInbound"].listener_filters[1].typed_config.Unpack(config)
    assert config.mark == 1337
    assert "envoy.filters.listener.original_src" not in [
        f.name for f in redirect.listener("virtualInbound").listener_filters
    ]
