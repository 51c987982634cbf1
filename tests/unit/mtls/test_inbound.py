"""Inbound chains by PeerAuthentication mode, as Envoy would pick them for a caller: a
sidecar over mTLS (TLS with Istio's ALPN), a plaintext client, or an app speaking its own
TLS; and the DownstreamTlsContext that terminates Istio mTLS."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from meshpilot.xds.generate.listeners import generate_sidecar_listeners
from tests.conftest import proxy_for, push_from_text
from tests.unit.listeners.lds_helpers import Target, build, select_chain, target
from tests.unit.mtls.meshes import BASE, SERVER, peer_authn

API = "{app: api}"
MESH_HTTP = {"transport": "tls", "alpn": ["istio-http/1.1"]}  # what a client sidecar sends
MESH_TCP = {"transport": "tls", "alpn": ["istio-peer-exchange", "istio"]}
APP_TLS = {"transport": "tls", "alpn": ["h2"]}
PLAIN_HTTP = {"transport": "raw_buffer", "alpn": ["http/1.1"]}
PLAIN = {"transport": "raw_buffer"}


def _inbound(policies: str) -> object:
    return build(BASE + policies, SERVER).listener("virtualInbound")


def _call(listener: object, port: int, how: dict[str, object]) -> tuple[Target | None, bool]:
    """(where the connection goes, whether the sidecar terminates mTLS) or (None, False)."""
    chain = select_chain(listener, port, **how)  # type: ignore[arg-type]
    if chain is None:
        return None, False
    return target(chain), chain.HasField("transport_socket")


HTTP_8080 = Target("inline", "inbound|8080||", "inbound|8080||")
TCP_9000 = Target("tcp", "inbound|9000||")


def test_permissive_by_default_accepts_mtls_and_plaintext() -> None:
    vi = _inbound("")
    assert _call(vi, 8080, MESH_HTTP) == (HTTP_8080, True)
    assert _call(vi, 8080, PLAIN_HTTP) == (HTTP_8080, False)
    assert _call(vi, 9000, MESH_TCP) == (TCP_9000, True)
    assert _call(vi, 9000, PLAIN) == (TCP_9000, False)
    assert _call(vi, 9000, APP_TLS) == (TCP_9000, False)  # passed through untouched
    # a sniffed port: mTLS HTTP is HTTP, mTLS without HTTP ALPN is TCP, both terminated
    http_7000 = Target("inline", "inbound|7000||", "inbound|7000||")
    assert _call(vi, 7000, MESH_HTTP) == (http_7000, True)
    assert _call(vi, 7000, MESH_TCP) == (Target("tcp", "inbound|7000||"), True)
    assert _call(vi, 7000, PLAIN_HTTP) == (http_7000, False)


def test_strict_refuses_plaintext() -> None:
    vi = _inbound(peer_authn("default", "istio-system", "STRICT"))
    assert _call(vi, 8080, MESH_HTTP) == (HTTP_8080, True)
    assert _call(vi, 8080, PLAIN_HTTP) == (None, False)
    assert _call(vi, 9000, MESH_TCP) == (TCP_9000, True)
    assert _call(vi, 9000, PLAIN) == (None, False)
    assert _call(vi, 7000, PLAIN_HTTP) == (None, False)
    # ports no service declares: only mTLS as well
    passthrough = select_chain(vi, 12345, transport="raw_buffer", alpn=["http/1.1"])
    assert passthrough is None
    every = [c for c in vi.filter_chains if c.name != "virtualInbound-blackhole"]
    assert all(c.HasField("transport_socket") for c in every)


def test_disable_terminates_nothing() -> None:
    vi = _inbound(peer_authn("default", "shop", "DISABLE"))
    assert _call(vi, 8080, PLAIN_HTTP) == (HTTP_8080, False)
    assert _call(vi, 9000, PLAIN) == (TCP_9000, False)
    # TLS from a caller goes to the app as it is (Istio's plaintext options match anything)
    assert _call(vi, 9000, MESH_TCP) == (TCP_9000, False)
    assert not any(c.HasField("transport_socket") for c in vi.filter_chains)


def test_port_level_exceptions_including_a_port_no_service_declares() -> None:
    policy = peer_authn(
        "api", "shop", "STRICT", API, "{8080: {mode: DISABLE}, 15999: {mode: PERMISSIVE}}"
    )
    vi = _inbound(policy)
    assert _call(vi, 8080, PLAIN_HTTP) == (HTTP_8080, False)
    assert _call(vi, 9000, PLAIN) == (None, False)
    catch_all = Target("inline", "InboundPassthroughCluster", "InboundPassthroughCluster")
    assert _call(vi, 15999, PLAIN_HTTP) == (catch_all, False)
    assert _call(vi, 15999, MESH_HTTP) == (catch_all, True)
    assert _call(vi, 12345, PLAIN_HTTP) == (None, False)  # STRICT elsewhere


def _context(policies: str = "", mesh: str = "") -> dict[str, Any]:
    _, push = push_from_text(BASE + policies + mesh)
    listeners = generate_sidecar_listeners(push, proxy_for(push, SERVER), None)
    vi = next(lst for lst in listeners if lst.name == "virtualInbound")
    chain = select_chain(vi, 9000, **MESH_TCP)  # type: ignore[arg-type]
    assert chain is not None
    packed = json_format.MessageToDict(chain.transport_socket, preserving_proto_field_name=True)
    context = packed["typed_config"]
    assert isinstance(context, dict)
    return context


def test_downstream_context_uses_workload_certificates_and_requires_clients() -> None:
    ctx = _context()
    assert ctx["require_client_certificate"] is True
    common = ctx["common_tls_context"]
    sds = common["tls_certificate_sds_secret_configs"]
    assert [s["name"] for s in sds] == ["default"]
    grpc = sds[0]["sds_config"]["api_config_source"]["grpc_services"][0]
    assert grpc["envoy_grpc"]["cluster_name"] == "sds-grpc"
    combined = common["combined_validation_context"]
    assert combined["validation_context_sds_secret_config"]["name"] == "ROOTCA"
    sans = combined["default_validation_context"]["match_typed_subject_alt_names"]
    assert sans == [{"san_type": "URI", "matcher": {"prefix": "spiffe://cluster.local/"}}]
    params = common["tls_params"]
    assert params["tls_minimum_protocol_version"] == "TLSv1_2"
    assert params["tls_maximum_protocol_version"] == "TLSv1_3"
    assert "ECDHE-ECDSA-AES256-GCM-SHA384" in params["cipher_suites"]
    assert common["alpn_protocols"] == ["istio-peer-exchange", "h2", "http/1.1"]


def test_trust_domain_aliases_are_accepted_on_inbound() -> None:
    mesh = """\
---
apiVersion: meshpilot.io/v1alpha1
kind: MeshConfig
spec: {trustDomain: corp.example, trustDomainAliases: [old.example]}
"""
    ctx = _context(mesh=mesh)
    common: Any = ctx["common_tls_context"]
    default = common["combined_validation_context"]["default_validation_context"]
    prefixes = [m["matcher"]["prefix"] for m in default["match_typed_subject_alt_names"]]
    assert prefixes == ["spiffe://corp.example/", "spiffe://old.example/"]
