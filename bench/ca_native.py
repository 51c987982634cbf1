"""B7's native load: h2load (Debian `nghttp2-client`) calling the CA over TLS and HTTP/2.

The Python gRPC client of ca_drive.py spends ~200 us of CPU per call on the same two cores
as the server, which caps the throughput it can show at about what the client costs. Here
the load generator is C (as B6 keeps Python out of the measured path): `h2load -c C -m 1`,
C connections each with one call in flight (C proxies asking at once), every call a real
IstioCertificateService/CreateCertificate: one gRPC frame, `te: trailers`, a bearer token.
h2load sends one body, so every call carries the same CSR and token; the CA keeps nothing
from one call to the next (it parses, checks the signature and the token, and signs each
time). h2load counts an HTTP 200 as success even when the gRPC status is an error, so the
run counts only if the control plane's own counter of issued certificates
(citadel_server_success_cert_issuance_count on /metrics) went up by exactly the number of
calls.

The token is on h2load's command line (its only way to set a header): a token of the
bench's throwaway CA, on a machine the bench owns, gone with its temporary directory.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.ca_drive import _children, _cpu_seconds, _wait_port, stop
from meshpilot.security.ca_api import CREATE_CERTIFICATE, IstioCertificateRequest

__all__ = ["NativeRun", "h2load_binary", "native_drive"]

_ISSUED = re.compile(rb"^citadel_server_success_cert_issuance_count(?:\{[^}]*\})? (\S+)$", re.M)


@dataclass(frozen=True)
class NativeRun:
    certs_per_s: float
    server_user_per_cert: float
    server_sys_per_cert: float
    children_per_cert: float  # the front Envoy's part of the sum

    @property
    def server_cpu_per_cert(self) -> float:
        return self.server_user_per_cert + self.server_sys_per_cert


def h2load_binary() -> str | None:
    return shutil.which("h2load")


def native_drive(
    argv: list[str],
    port: int,
    monitoring: int,
    token: str,
    csr_pem: str,
    calls: int,
    connections: int,
    streams: int,
    work_dir: Path,
) -> NativeRun:
    """Start the server command, load it with h2load, and return throughput and the
    server's CPU per certificate; SystemExit if a call did not yield a certificate."""
    binary = h2load_binary()
    if binary is None:
        raise SystemExit("h2load not found: apt-get install nghttp2-client")
    message = IstioCertificateRequest(csr=csr_pem, validity_duration=86400).SerializeToString()
    body = work_dir / "create-certificate.bin"
    body.write_bytes(b"\0" + len(message).to_bytes(4, "big") + message)
    load = [
        binary, "-n", str(calls), "-c", str(connections), "-m", str(streams), "-t", "1",
        "-H", "content-type: application/grpc", "-H", "te: trailers",
        "-H", f"authorization: Bearer {token}", "-d", str(body),
        f"https://127.0.0.1:{port}{CREATE_CERTIFICATE}",
    ]  # fmt: skip
    server = subprocess.Popen(argv)
    try:
        _wait_port(port)
        _wait_port(monitoring)
        time.sleep(0.2)
        children = _children(server.pid)
        issued = _issued(monitoring)
        user, system = _cpu_seconds(server.pid, *children)
        child_cpu = sum(_cpu_seconds(*children))
        start = time.perf_counter()
        out = subprocess.run(load, capture_output=True, check=True, timeout=600).stdout
        elapsed = time.perf_counter() - start
        user_after, system_after = _cpu_seconds(server.pid, *children)
        child_cpu = sum(_cpu_seconds(*children)) - child_cpu
        issued = _issued(monitoring) - issued
    finally:
        stop(server)
    succeeded = re.search(rb"requests: .* (\d+) succeeded", out)
    if issued != calls or succeeded is None or int(succeeded.group(1)) != calls:
        raise SystemExit(f"h2load: {calls} calls but {issued} certificates issued:\n{out.decode()}")
    return NativeRun(
        calls / elapsed, (user_after - user) / calls, (system_after - system) / calls,
        child_cpu / calls,
    )  # fmt: skip


def _issued(monitoring: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{monitoring}/metrics", timeout=10) as answer:
        found = _ISSUED.search(answer.read())
    return int(float(found.group(1))) if found else 0
