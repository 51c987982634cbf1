"""Tools of the secure mesh tests: a packet capture on a pod's veth, JWTs signed with a real
RSA key and a JWKS server in a pod of its own, workload certificates (real, from the mesh
CA, or forged), the TLS probe run in a pod, and the secret values that must never show up
in logs or debug endpoints.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import socket
import struct
import sys
import threading
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from envoy.service.discovery.v3 import discovery_pb2
from envoy.service.secret.v3 import sds_pb2_grpc

from meshpilot.agent.certs.workload import build_csr, new_key
from meshpilot.agent.options import sds_socket_path
from meshpilot.demo.mesh import DemoMesh
from meshpilot.runtime.cluster import Cluster
from meshpilot.runtime.pod import PodSpec
from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.identity import SpiffeId

ETH_P_ALL = 0x0003
PROBE = Path(__file__).with_name("tls_probe.py")
NETWORKING = "networking.istio.io/v1"


class WireCapture:
    """TCP payloads seen on a network interface (AF_PACKET, as tcpdump reads them), for
    segments to or from `port`, in the order they passed."""

    def __init__(self, interface: str, port: int) -> None:
        self.port = port
        self.payloads: list[bytes] = []
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._sock.bind((interface, 0))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WireCapture:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                frame = self._sock.recv(65535)
            except TimeoutError:
                continue
            if (payload := self._tcp_payload(frame)) is not None:
                self.payloads.append(payload)

    def _tcp_payload(self, frame: bytes) -> bytes | None:
        if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
            return None
        ip_len = (frame[14] & 0x0F) * 4
        tcp = frame[14 + ip_len :]
        sport, dport = struct.unpack("!HH", tcp[:4])
        if self.port not in (sport, dport):
            return None
        payload = tcp[(tcp[12] >> 4) * 4 :]
        total = struct.unpack("!H", frame[16:18])[0]
        payload = payload[: max(0, total - ip_len - (tcp[12] >> 4) * 4)]
        return payload or None


class JwtIssuer:
    """An issuer with an RSA key: its JWKS (inline in RequestAuthentication, or served by
    a JWKS server) and tokens. Another instance with the same issuer and a new `kid` is
    the issuer after a key rotation."""

    def __init__(self, issuer: str, kid: str = "e2e") -> None:
        self.issuer = issuer
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        numbers = self.key.public_key().public_numbers()
        self.jwks = json.dumps(
            {"keys": [{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
                       "e": _b64(_int_bytes(numbers.e)), "n": _b64(_int_bytes(numbers.n))}]}
        )  # fmt: skip

    def token(self, subject: str, forged: bool = False) -> str:
        now = int(dt.datetime.now(dt.UTC).timestamp())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        claims = {"iss": self.issuer, "sub": subject, "iat": now, "exp": now + 3600}
        signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048) if forged else self.key
        signature = key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing}.{_b64(signature)}"


class JwksServer:
    """An identity provider's key endpoint: `python -m http.server` in a pod of its own
    (namespace `external`, no sidecar), serving `jwks.json` from a directory; a rotation
    rewrites the file. Its access log (the pod's app.log) shows who fetched the keys."""

    PORT = 8000
    HOST = "jwks.external.test"

    def __init__(self, mesh: DemoMesh, directory: Path, issuer: JwtIssuer) -> None:
        assert isinstance(mesh.cluster, Cluster)
        self.directory = directory
        self.serve(issuer)
        argv = (sys.executable, "-m", "http.server", str(self.PORT), "--bind", "0.0.0.0",
                "--directory", str(directory))  # fmt: skip
        self.pod = mesh.cluster.add_pod(PodSpec(name="jwks", namespace="external", app=argv))
        self.pod.wait_listening(self.PORT, timeout=10)

    @property
    def uri(self) -> str:
        return f"http://{self.HOST}:{self.PORT}/jwks.json"

    def serve(self, issuer: JwtIssuer) -> None:
        """Publish the issuer's key set (atomically: a fetch never sees half of it)."""
        temporary = self.directory / ".jwks.json.tmp"
        temporary.write_text(issuer.jwks)
        temporary.replace(self.directory / "jwks.json")

    def service_entry(self) -> dict[str, Any]:
        """The IdP as users register one: a ServiceEntry for its host, at the pod's address."""
        spec = {
            "hosts": [self.HOST],
            "ports": [{"number": self.PORT, "name": "http", "protocol": "HTTP"}],
            "resolution": "STATIC",
            "location": "MESH_EXTERNAL",
            "endpoints": [{"address": str(self.pod.ip)}],
        }
        meta = {"name": "jwks-idp", "namespace": "default"}
        return {"apiVersion": NETWORKING, "kind": "ServiceEntry", "metadata": meta, "spec": spec}

    def fetches(self) -> list[str]:
        """Access log lines of key set requests."""
        log = (self.pod.workdir / "app.log").read_text(errors="replace")
        return [line for line in log.splitlines() if "GET /jwks.json" in line]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int_bytes(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def workload_pems(mesh: DemoMesh, identity: SpiffeId, forged: bool) -> tuple[bytes, bytes]:
    """(certificate chain, key) for `identity`: signed by the mesh CA, or self-signed by a
    look-alike CA with the same SPIFFE id (forged)."""
    assert mesh.workspace is not None
    key = new_key()
    if not forged:
        ca = CertificateAuthority.open(mesh.workspace.ca_dir)
        issued = ca.sign(build_csr(key, str(identity)), identity, dt.timedelta(hours=1))
        return "".join(issued.chain_pem).encode(), key.pem()
    fake_key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(x509.NameOID.ORGANIZATION_NAME, "cluster.local")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.UniformResourceIdentifier(str(identity))]), False
        )
        .sign(fake_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), key.pem()


def tls_probe(mesh: DemoMesh, pod: str, address: str, cert: Path, key: Path) -> dict[str, Any]:
    """Run tls_probe.py in `pod` (no sidecar there): HTTP over TLS with this certificate."""
    argv = [sys.executable, str(PROBE), address, str(cert), str(key)]
    result = mesh.pods[pod].exec(argv, timeout=20)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def workload_key(mesh: DemoMesh, pod: str) -> bytes:
    """The private key the pod's agent serves its Envoy as SDS `default` (asked on the
    agent's socket, as root may)."""
    path = sds_socket_path(mesh.agent_dirs[pod])
    with grpc.insecure_channel(f"unix:{path}") as channel:
        stub = sds_pb2_grpc.SecretDiscoveryServiceStub(channel)
        reply = stub.FetchSecrets(discovery_pb2.DiscoveryRequest(resource_names=["default"]))
    secret = secret_pb2.Secret()
    reply.resources[0].Unpack(secret)
    return bytes(secret.tls_certificate.private_key.inline_bytes)


def secret_values(mesh: DemoMesh) -> dict[str, str]:
    """What must never appear in a log line or a debug answer, by what it is: every pod's
    token, the CA's keys, the token signing key, the gateway's TLS key, workload keys."""
    assert mesh.workspace is not None
    found: dict[str, str] = {}
    for name in mesh.pods:
        token = mesh.token_file(name)
        if token.exists():
            found[f"token of {name}"] = token.read_text().strip()
    for path in mesh.workspace.ca_dir.iterdir():
        data = path.read_bytes() if path.is_file() else b""
        if b"PRIVATE KEY" in data:
            found |= _pem_lines(f"{path.name}", data)
        elif path.name == "token-signing-key":
            found["token signing key (base64)"] = base64.b64encode(data).decode()[:24]
            found["token signing key (hex)"] = data.hex()[:24]
    assert mesh.cert is not None
    found |= _pem_lines("ingress gateway key", mesh.cert.key_pem)
    for proxied in ("client", "ratings-v1", "istio-ingressgateway-0"):
        found |= _pem_lines(f"workload key of {proxied}", workload_key(mesh, proxied))
    return found


def _pem_lines(what: str, pem: bytes) -> dict[str, str]:
    """Base64 lines of a PEM body (long enough to be unique)."""
    lines = [ln for ln in pem.decode().splitlines() if ln and not ln.startswith("-----")]
    return {f"{what} line {i}": ln for i, ln in enumerate(lines) if len(ln) >= 40}
