"""The workload certificates Envoy expects from its agent (`default`, `ROOTCA` over the
`sds-grpc` Unix socket), so that clusters and listeners using mTLS finish warming.

This stands in for the proxy agent's SDS, which the security issue brings; it is not part
of what the ADS tests check (they check our control plane), only what lets Envoy reach the
point where it requests every xDS type. A real gRPC server with real certificates: a CA
made per test and a leaf with the SPIFFE identity of the proxy's service account.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2
from envoy.service.discovery.v3 import discovery_pb2
from envoy.service.secret.v3 import sds_pb2_grpc
from google.protobuf import any_pb2

SECRET_TYPE = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _certificates(spiffe: str) -> tuple[bytes, bytes, bytes]:
    """(CA cert, leaf cert, leaf key) in PEM."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cluster.local")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.UniformResourceIdentifier(spiffe)]), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return _pem_cert(ca), _pem_cert(leaf), key_pem


class _Sds(sds_pb2_grpc.SecretDiscoveryServiceServicer):  # type: ignore[misc]
    def __init__(self, secrets: dict[str, secret_pb2.Secret]) -> None:
        self.secrets = secrets

    def secret(self, name: str) -> secret_pb2.Secret | None:
        """`default`, `ROOTCA`, and the agent's file secrets: `file-root:<path|system>` (a CA
        bundle, the test CA unless the file exists) and `file-cert:<cert>~<key>`."""
        if name in self.secrets:
            return self.secrets[name]
        if name.startswith("file-root:"):
            path = name.removeprefix("file-root:")
            path = SYSTEM_CA if path == "system" else path
            ca = Path(path).read_bytes() if Path(path).is_file() else self.ca
            return secret_pb2.Secret(
                name=name,
                validation_context=common_pb2.CertificateValidationContext(
                    trusted_ca={"inline_bytes": ca}
                ),
            )
        if name.startswith("file-cert:"):
            copy = secret_pb2.Secret()
            copy.CopyFrom(self.secrets["default"])
            copy.name = name
            return copy
        return None

    @property
    def ca(self) -> bytes:
        return bytes(self.secrets["ROOTCA"].validation_context.trusted_ca.inline_bytes)

    def StreamSecrets(
        self, requests: Iterator[discovery_pb2.DiscoveryRequest], context: Any
    ) -> Iterator[discovery_pb2.DiscoveryResponse]:
        answered: frozenset[str] = frozenset()
        for n, request in enumerate(requests):
            names = frozenset(request.resource_names)
            if request.HasField("error_detail") or names <= answered:
                continue
            answered = names
            resources = []
            for name in sorted(names):
                if (secret := self.secret(name)) is not None:
                    packed = any_pb2.Any()
                    packed.Pack(secret)
                    resources.append(packed)
            yield discovery_pb2.DiscoveryResponse(
                version_info=str(n), type_url=SECRET_TYPE, nonce=str(n), resources=resources
            )


class WorkloadSds:
    """Serves `default` and `ROOTCA` on `socket` until `stop()`."""

    def __init__(self, socket: Path, spiffe: str = "spiffe://cluster.local/ns/default/sa/default"):
        self.socket = socket
        ca, cert, key = _certificates(spiffe)
        self.secrets = {
            "default": secret_pb2.Secret(
                name="default",
                tls_certificate=common_pb2.TlsCertificate(
                    certificate_chain={"inline_bytes": cert}, private_key={"inline_bytes": key}
                ),
            ),
            "ROOTCA": secret_pb2.Secret(
                name="ROOTCA",
                validation_context=common_pb2.CertificateValidationContext(
                    trusted_ca={"inline_bytes": ca}
                ),
            ),
        }
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
        sds_pb2_grpc.add_SecretDiscoveryServiceServicer_to_server(_Sds(self.secrets), self._server)
        if not self._server.add_insecure_port(f"unix:{socket}"):
            raise OSError(f"cannot listen on unix:{socket}")

    def start(self) -> WorkloadSds:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=0).wait()
