"""Run inside a pod without a sidecar: one HTTP/1.1 GET over TLS to ADDRESS (ip:port) with
a client certificate, as a sidecar would send it (Istio's ALPN). Prints JSON: the status
line, or the TLS or connection error.

    python tls_probe.py 10.244.0.5:9080 cert.pem key.pem
"""

from __future__ import annotations

import json
import socket
import ssl
import sys


def main() -> None:
    address, cert, key = sys.argv[1:4]
    host, _, port = address.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the server's identity is not what is tested
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["istio-http/1.1", "istio", "http/1.1"])
    try:
        raw = socket.create_connection((host, int(port)), timeout=5)
        with context.wrap_socket(raw) as tls:
            tls.sendall(b"GET / HTTP/1.1\r\nHost: ratings\r\nConnection: close\r\n\r\n")
            answer = tls.recv(4096).decode(errors="replace")
        print(json.dumps({"status_line": answer.split("\r\n", 1)[0]}))
    except (OSError, ssl.SSLError) as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))


if __name__ == "__main__":
    main()
