"""Real Envoys with the generated mTLS configuration: a client sidecar's auto-mTLS cluster
talks to a server sidecar's inbound chains; the app sees the caller's SPIFFE identity;
STRICT refuses plaintext, PERMISSIVE accepts it; a certificate from another root, or a
server whose identity is not the service's, is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.mtls.envoy_pair import Ca, EnvoyPair, running
from tests.unit.mtls.meshes import BASE, CLIENT, SERVER, peer_authn

pytestmark = pytest.mark.envoy

API = "spiffe://cluster.local/ns/shop/sa/api"
WEB = "spiffe://cluster.local/ns/shop/sa/web"
CLUSTER = "outbound|80||api.shop.svc.cluster.local"
STRICT = peer_authn("default", "istio-system", "STRICT")


def _pair(
    tmp: Path,
    policies: str = "",
    server_id: str = API,
    client_ca: Ca | None = None,
) -> Iterator[EnvoyPair]:
    ca = Ca()
    pair = EnvoyPair(
        mesh_yaml=BASE + policies,
        server_pod=SERVER,
        client_pod=CLIENT,
        cluster=CLUSTER,
        target_port=8080,
        workdir=tmp,
        ca=ca,
        server_cert=ca.issue(server_id),
        client_cert=(client_ca or ca).issue(WEB),
        client_root=ca.root_pem,
    )
    return running(pair)


def test_mtls_between_sidecars_carries_the_callers_identity(tmp_path: Path) -> None:
    for pair in _pair(tmp_path):
        status, body = pair.call()
        assert status == 200, pair.log("client") + pair.log("server")
        assert f"URI={WEB}" in body["xfcc"]  # the server terminated mTLS and saw the client
        status, body = pair.call(direct=True)  # PERMISSIVE: plaintext is accepted too
        assert status == 200 and body["xfcc"] == ""


def test_strict_refuses_plaintext_and_accepts_mtls(tmp_path: Path) -> None:
    for pair in _pair(tmp_path, STRICT):
        assert pair.call(direct=True)[0] == 0
        status, body = pair.call()
        assert status == 200 and f"URI={WEB}" in body["xfcc"]


def test_a_client_certificate_from_another_root_is_refused(tmp_path: Path) -> None:
    for pair in _pair(tmp_path, STRICT, client_ca=Ca()):
        assert pair.call()[0] == 503
        failed = pair.stats("server", "ssl.fail_verify")
        assert sum(failed.values()) > 0, failed  # the server refused the forged client


def test_a_client_certificate_of_another_trust_domain_is_refused(tmp_path: Path) -> None:
    ca = Ca()
    pair = EnvoyPair(
        mesh_yaml=BASE + STRICT,
        server_pod=SERVER,
        client_pod=CLIENT,
        cluster=CLUSTER,
        target_port=8080,
        workdir=tmp_path,
        ca=ca,
        server_cert=ca.issue(API),
        client_cert=ca.issue("spiffe://other.domain/ns/shop/sa/web"),
    )
    for started in running(pair):
        assert started.call()[0] == 503
        failed = started.stats("server", "ssl.fail_verify_san")
        assert sum(failed.values()) > 0, failed


def test_a_server_with_another_identity_is_refused(tmp_path: Path) -> None:
    for pair in _pair(tmp_path, server_id="spiffe://cluster.local/ns/shop/sa/impostor"):
        assert pair.call()[0] == 503
        failed = pair.stats("client", "ssl.fail_verify_san")
        assert sum(failed.values()) > 0, failed  # the client refused the server


def test_peer_authentication_disable_sends_plaintext(tmp_path: Path) -> None:
    disable = peer_authn("default", "shop", "DISABLE")
    for pair in _pair(tmp_path, disable):
        status, body = pair.call()
        assert status == 200 and body["xfcc"] == ""  # plaintext end to end
