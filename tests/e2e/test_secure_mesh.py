"""The demo mesh, secure by default: the CA in `meshpilot discovery`, a token per pod, agents
with workload certificates over SDS, mTLS between sidecars; PeerAuthentication,
AuthorizationPolicy and RequestAuthentication applied by editing the watched files.

One mesh for the module (real netns pods, real Envoy), with 16 s workload certificates so
that rotation happens while the tests run. Policies go on `ratings`; each test removes its
file and waits until traffic shows the default again. `httpbin` (the external server's pod)
has no sidecar: it is the plaintext client and the home of the forged certificate. The
JWKS test adds an identity provider's key server in a pod of its own (`jwks.external`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.live_mesh import Traffic, assert_no_nacks, running_mesh, wait_for
from tests.e2e.secure_mesh import (
    JwksServer,
    JwtIssuer,
    WireCapture,
    secret_values,
    tls_probe,
    workload_pems,
)

from meshpilot.agent.ca_client import CaClient, CaError, CaSettings
from meshpilot.agent.certs.workload import build_csr, new_key
from meshpilot.demo.manifests import dump
from meshpilot.demo.mesh import DemoMesh
from meshpilot.demo.topology import TLS_MODE_LABEL, Role, Workload
from meshpilot.security.identity import SpiffeId

pytestmark = pytest.mark.envoy

RATINGS = "http://ratings:9080/"
SECURITY = "security.istio.io/v1"
CLIENT = "cluster.local/ns/default/sa/client"
SECRET_TTL_S = 16


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    yield from running_mesh(secret_ttl=f"{SECRET_TTL_S}s")


@pytest.fixture(autouse=True)
def _no_nacks(mesh: DemoMesh) -> Iterator[None]:
    yield
    assert_no_nacks(mesh)


def _policy(kind: str, name: str, spec: dict[str, object]) -> dict[str, object]:
    meta = {"name": name, "namespace": "default"}
    return {"apiVersion": SECURITY, "kind": kind, "metadata": meta, "spec": spec}


def _ratings(spec: dict[str, object]) -> dict[str, object]:
    return {"selector": {"matchLabels": {"app": "ratings"}}, **spec}


def _status(mesh: DemoMesh, pod: str, *headers: str, path: str = "/", method: str = "") -> int:
    args = [a for h in headers for a in ("-H", h)] + (["-X", method] if method else [])
    host = "ratings" if mesh.workloads[pod].namespace == "default" else "ratings.default"
    counts = mesh.client(pod, "http", f"http://{host}:9080{path}", *args)["counts"]
    ((answer, _),) = counts.items()
    status = int(answer.split(" ", 1)[0])
    assert status != 0, f"{pod}: no answer: {answer}"
    return status


def _plaintext_from_httpbin(mesh: DemoMesh) -> int:
    """GET from the pod without a sidecar straight to a ratings pod (status 0: refused)."""
    counts = mesh.client("httpbin", "http", f"http://{mesh.ip('ratings-v1')}:9080/")["counts"]
    ((answer, _),) = counts.items()
    return int(answer.split(" ", 1)[0])


def _apply(mesh: DemoMesh, file: str, *docs: dict[str, object]) -> None:
    assert mesh.workspace is not None
    mesh.workspace.config.write(file, dump(docs))


def _remove(mesh: DemoMesh, file: str) -> None:
    assert mesh.workspace is not None
    mesh.workspace.config.remove(file)
    wait_for(lambda: _status(mesh, "client-locked") == 200, "ratings open again")


# ---------------------------------------------------------------- mTLS on the wire


def test_sidecar_to_sidecar_traffic_is_tls_on_the_wire(mesh: DemoMesh) -> None:
    """A capture on ratings' veth (first test: no pooled connection yet) shows a TLS
    handshake and none of the HTTP request; the same capture sees a plaintext client's
    request line, so it would have seen one."""
    marker = "x-wire-marker: e2e-7f3c9a"
    link = mesh.pods["ratings-v1"].wiring.host_link  # type: ignore[attr-defined]
    with WireCapture(link, 9080) as wire:
        assert _status(mesh, "client", marker) == 200
    data = b"".join(wire.payloads)
    assert wire.payloads and wire.payloads[0][0] == 0x16, "first bytes are a TLS handshake"
    assert b"GET /" not in data and b"e2e-7f3c9a" not in data and b"HTTP/1.1" not in data
    with WireCapture(link, 9080) as plain:
        assert _plaintext_from_httpbin(mesh) == 200  # PERMISSIVE: plaintext accepted
    assert b"GET / HTTP/1.1" in b"".join(plain.payloads)


# ---------------------------------------------------------------- PeerAuthentication


def test_strict_refuses_plaintext_and_permissive_accepts_it(mesh: DemoMesh) -> None:
    assert _plaintext_from_httpbin(mesh) == 200
    spec = _ratings({"mtls": {"mode": "STRICT"}})
    _apply(mesh, "peer-authn.yaml", _policy("PeerAuthentication", "ratings-strict", spec))
    try:
        wait_for(lambda: _plaintext_from_httpbin(mesh) == 0, "STRICT refuses plaintext")
        assert _status(mesh, "client") == 200  # sidecars still get through, over mTLS
    finally:
        spec = _ratings({"mtls": {"mode": "PERMISSIVE"}})
        _apply(mesh, "peer-authn.yaml", _policy("PeerAuthentication", "ratings-strict", spec))
    wait_for(lambda: _plaintext_from_httpbin(mesh) == 200, "PERMISSIVE accepts plaintext")
    assert _status(mesh, "client") == 200
    assert mesh.workspace is not None
    mesh.workspace.config.remove("peer-authn.yaml")


def test_forged_certificate_is_refused_and_a_real_one_accepted(
    mesh: DemoMesh, tmp_path: Path
) -> None:
    """From the pod without a sidecar, TLS to ratings' sidecar with a client certificate for
    the client's SPIFFE id: signed by the mesh CA it is served; self-signed it is not."""
    identity = SpiffeId("cluster.local", "default", "client")
    target = f"{mesh.ip('ratings-v1')}:9080"
    results = {}
    for forged in (False, True):
        chain, key = workload_pems(mesh, identity, forged)
        cert_file, key_file = tmp_path / f"cert-{forged}.pem", tmp_path / f"key-{forged}.pem"
        cert_file.write_bytes(chain)
        key_file.write_bytes(key)
        key_file.chmod(0o600)
        results[forged] = tls_probe(mesh, "httpbin", target, cert_file, key_file)
    assert results[False].get("status_line") == "HTTP/1.1 200 OK", results[False]
    assert "error" in results[True] or not results[True].get("status_line"), results[True]


# ---------------------------------------------------------------- AuthorizationPolicy


@pytest.fixture(scope="module")
def outsider(mesh: DemoMesh) -> str:
    """A pod with a sidecar in namespace `other` (service account `outsider`)."""
    work = Workload("outsider", Role.CLIENT, "outsider", namespace="other",
                    extra_labels=(TLS_MODE_LABEL,))  # fmt: skip
    mesh.add_pod(work)
    return work.name


def test_authorization_by_principal_namespace_method_path_header_deny_wins(
    mesh: DemoMesh, outsider: str
) -> None:
    deny = _ratings({"action": "DENY", "rules": [{"to": [{"operation": {"paths": ["/deny*"]}}]}]})
    allow = _ratings({"action": "ALLOW", "rules": [
        {"from": [{"source": {"principals": [CLIENT]}}],
         "to": [{"operation": {"methods": ["GET"]}}]},
        {"from": [{"source": {"namespaces": ["default"]}}],
         "when": [{"key": "request.headers[x-pass]", "values": ["yes"]}]},
    ]})  # fmt: skip
    _apply(mesh, "authz.yaml", _policy("AuthorizationPolicy", "ratings-deny", deny),
           _policy("AuthorizationPolicy", "ratings-allow", allow))  # fmt: skip
    try:
        wait_for(lambda: _status(mesh, "client-locked") == 403, "ALLOW policy in force")
        assert _status(mesh, "client") == 200  # principal + GET
        assert _status(mesh, "client", method="POST") == 403  # method not allowed
        assert _status(mesh, "client", path="/deny/x") == 403  # DENY wins over ALLOW
        assert _status(mesh, "client-locked", "x-pass: yes") == 200  # namespace + header
        assert _status(mesh, "client-locked", "x-pass: no") == 403  # header value
        assert _status(mesh, outsider, "x-pass: yes") == 403  # namespace `other`
        assert _status(mesh, "client-locked", "x-pass: yes", path="/deny") == 403
    finally:
        _remove(mesh, "authz.yaml")


def test_jwt_valid_invalid_missing(mesh: DemoMesh) -> None:
    issuer = JwtIssuer("e2e@meshpilot.test")
    authn = _ratings({"jwtRules": [{"issuer": issuer.issuer, "jwks": issuer.jwks}]})
    allow = _ratings({"rules": [{"from": [{"source": {
        "requestPrincipals": [f"{issuer.issuer}/alice"]}}]}]})  # fmt: skip
    _apply(mesh, "jwt.yaml", _policy("RequestAuthentication", "ratings-jwt", authn),
           _policy("AuthorizationPolicy", "ratings-alice", allow))  # fmt: skip
    bearer = "authorization: Bearer "
    try:
        wait_for(lambda: _status(mesh, "client-locked") == 403, "requestPrincipals in force")
        assert _status(mesh, "client", bearer + issuer.token("alice")) == 200
        assert _status(mesh, "client", bearer + issuer.token("alice", forged=True)) == 401
        assert _status(mesh, "client", bearer + "not-a-jwt") == 401
        assert _status(mesh, "client", bearer + issuer.token("bob")) == 403
        assert _status(mesh, "client") == 403  # missing
    finally:
        _remove(mesh, "jwt.yaml")


def test_jwt_keys_fetched_by_envoy_from_a_jwks_server(mesh: DemoMesh, tmp_path: Path) -> None:
    """`jwksUri` at an identity provider in a pod of its own, registered by a ServiceEntry:
    ratings' Envoy fetches the keys itself (remote_jwks through `outbound|8000||<host>`).
    A rotation at the server is not seen while Envoy's cache holds the old set; a config
    change (a new filter, an empty cache) fetches the new one."""
    issuer = JwtIssuer("idp@meshpilot.test", kid="k1")
    server = JwksServer(mesh, tmp_path, issuer)
    rule: dict[str, object] = {"issuer": issuer.issuer, "jwksUri": server.uri}
    allow = _ratings({"rules": [{"from": [{"source": {
        "requestPrincipals": [f"{issuer.issuer}/alice"]}}]}]})  # fmt: skip

    def apply() -> None:
        authn = _ratings({"jwtRules": [rule]})
        _apply(mesh, "jwks.yaml", server.service_entry(),
               _policy("RequestAuthentication", "ratings-jwks", authn),
               _policy("AuthorizationPolicy", "ratings-idp-alice", allow))  # fmt: skip

    bearer = "authorization: Bearer "
    apply()
    try:
        wait_for(lambda: _status(mesh, "client-locked") == 403, "requestPrincipals in force")
        # The policy can be in force a moment before the IdP's cluster is warm: Envoy fetches
        # the keys on a request, and a fetch that fails answers 401 until one succeeds.
        token = bearer + issuer.token("alice")
        wait_for(lambda: _status(mesh, "client", token) == 200, "keys fetched from the IdP")
        fetched = server.fetches()
        assert fetched and all(line.startswith(f"{mesh.ip('ratings-v1')} ") for line in fetched)
        # ";" : Envoy's stat scope for the cluster's transport socket (no TLS to the IdP)
        jwks_cluster = r"^cluster\.outbound\|8000\|\|jwks\.external\.test;?\.upstream_cx_total$"
        assert sum(mesh.stats("ratings-v1", jwks_cluster).values()) >= 1
        assert _status(mesh, "client", bearer + issuer.token("alice", forged=True)) == 401
        assert _status(mesh, "client", bearer + issuer.token("bob")) == 403
        assert _status(mesh, "client") == 403  # missing
        rotated = JwtIssuer(issuer.issuer, kid="k2")
        server.serve(rotated)
        assert _status(mesh, "client", bearer + rotated.token("alice")) == 401  # cached set
        assert _status(mesh, "client", bearer + issuer.token("alice")) == 200
        rule["timeout"] = "4s"
        apply()
        new_token = bearer + rotated.token("alice")
        wait_for(lambda: _status(mesh, "client", new_token) == 200, "the rotated key fetched")
        assert _status(mesh, "client", bearer + issuer.token("alice")) == 401
        assert len(server.fetches()) > len(fetched)
    finally:
        _remove(mesh, "jwks.yaml")


# ---------------------------------------------------------------- the CA


def test_ca_refuses_a_csr_for_an_identity_the_caller_does_not_hold(mesh: DemoMesh) -> None:
    """The client pod's token asking for ratings' identity: refused, and logged; the same
    token for its own identity: signed."""
    assert mesh.workspace is not None
    settings = CaSettings(
        address=f"unix:{mesh.workspace.secure_socket}",
        root_cert=mesh.workspace.root_cert,
        token_file=mesh.token_file("client"),
    )
    client = CaClient(settings)
    own = build_csr(new_key(), f"spiffe://{CLIENT}")
    chain = asyncio.run(client.sign(own, 3600))
    assert len(chain) >= 2
    other = build_csr(new_key(), "spiffe://cluster.local/ns/default/sa/ratings")
    with pytest.raises(CaError, match="PERMISSION_DENIED"):
        asyncio.run(client.sign(other, 3600))
    log = mesh.workspace.discovery_log.read_text()
    assert re.search(r"refused CSR .*token of pod client\.default", log), log[-2000:]


def _serial(mesh: DemoMesh, pod: str) -> str:
    status, body = mesh.admin(pod, "/certs")
    assert status == 200, body
    for cert in json.loads(body)["certificates"]:
        for chain in cert.get("cert_chain", []):
            if any("spiffe://" in s.get("uri", "") for s in chain.get("subject_alt_names", [])):
                return str(chain["serial_number"])
    raise AssertionError(f"{pod}: no workload certificate in /certs")


def test_rotation_under_continuous_load_drops_nothing(mesh: DemoMesh) -> None:
    """Workload certificates live 16 s and are renewed at 80%: over 15 s of requests both
    ends rotate (new serials in Envoy) and every request gets its 200."""
    before = {pod: _serial(mesh, pod) for pod in ("client", "reviews-v1")}
    traffic = Traffic(mesh, "client", "http://reviews:9080/", SECRET_TTL_S - 1)
    log = traffic.log(timeout=60)
    after = {pod: _serial(mesh, pod) for pod in ("client", "reviews-v1")}
    failed = [entry for entry in log if entry[1] != 200]
    assert len(log) > 100 and failed == [], failed[:5]
    assert all(before[pod] != after[pod] for pod in before), (before, after)


# ---------------------------------------------------------------- secrets stay secret


def test_no_key_or_token_in_any_log_or_debug_endpoint(mesh: DemoMesh) -> None:
    assert mesh.workspace is not None and mesh.control is not None
    secrets = secret_values(mesh)
    assert len(secrets) > 10
    texts = {"discovery.log": mesh.workspace.discovery_log.read_text(errors="replace")}
    for name, pod in mesh.pods.items():
        for log in pod.workdir.glob("*.log"):
            texts[f"{name}/{log.name}"] = log.read_text(errors="replace")
    for path in ("/debug/syncz", "/debug/configz", "/debug/registryz", "/metrics"):
        texts[path] = mesh.control.get(path)[1]
    for entry in mesh.control.json("/debug/syncz"):
        path = f"/debug/config_dump?proxyID={entry['proxy']}"
        texts[path] = mesh.control.get(path)[1]
    leaks = [(what, where) for what, value in secrets.items()
             for where, text in texts.items() if value in text]  # fmt: skip
    assert leaks == []
