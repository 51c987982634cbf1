"""Run inside a pod as some user: ask the SDS server on SOCKET for the workload secret
`default`, as an Envoy would. Prints JSON: the certificate's URI SANs and a digest of the
private key, or the error (the errno name when the socket cannot be reached).

    python sds_probe.py /tmp/.../var/run/secrets/workload-spiffe-uds/socket
"""

from __future__ import annotations

import errno
import hashlib
import json
import socket
import sys

import grpc
from cryptography import x509
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from envoy.service.discovery.v3 import discovery_pb2
from envoy.service.secret.v3 import sds_pb2_grpc


def main() -> None:
    path = sys.argv[1]
    try:  # first the bare connect, which tells why the socket is out of reach
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
    except OSError as exc:
        print(json.dumps({"error": errno.errorcode.get(exc.errno or 0, str(exc))}))
        return
    with grpc.insecure_channel(f"unix:{path}") as channel:
        stub = sds_pb2_grpc.SecretDiscoveryServiceStub(channel)
        request = discovery_pb2.DiscoveryRequest(resource_names=["default"])
        try:
            reply = stub.FetchSecrets(request, timeout=10)
        except grpc.RpcError as exc:
            print(json.dumps({"error": f"{exc.code().name}: {exc.details()}"}))
            return
    if not reply.resources:
        print(json.dumps({"error": "no secret `default` in the answer"}))
        return
    secret = secret_pb2.Secret()
    reply.resources[0].Unpack(secret)
    tls = secret.tls_certificate
    cert = x509.load_pem_x509_certificate(bytes(tls.certificate_chain.inline_bytes))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    key = bytes(tls.private_key.inline_bytes)
    print(json.dumps({
        "sans": sans.get_values_for_type(x509.UniformResourceIdentifier),
        "key_sha256": hashlib.sha256(key).hexdigest(),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
