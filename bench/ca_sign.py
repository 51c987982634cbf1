"""B7 (CA issuance): CSRs signed through the CA endpoint vs bare in-process signing, one run.

    python bench/ca_sign.py [--csrs 4000] [--concurrency 64] [--clients 1] [--kinds ecdsa,rsa]
                            [--json FILE]

Through the endpoint: `meshpilot discovery --ca-dir` runs as its own process (the real
command, TLS on its secure port); client processes send IstioCertificateService/
CreateCertificate with `authorization: Bearer <token>` (one token per simulated pod),
--concurrency calls in flight each, over TLS that verifies the serving certificate.
Bare: the same CSRs signed in this process with `cryptography` alone (parse, check the
signature, build the same X.509 SVID, sign), no gRPC, no TLS, no token.

Keys and CSRs (ECDSA P-256, and RSA 2048 from a pool of 32 keys: RSA key generation would
dominate the setup) are made before the clock starts; the CA's own key is ECDSA P-256 for
both. Per CSR kind: certs/s through the endpoint and bare, the ratio (target >= 0.5), the
endpoint's p50/p90/p99 latency with --concurrency calls in flight and with one call at a
time (what a single proxy waits); target >= 500 certs/s. On a shared box wall clock drifts,
so CPU time per certificate is reported too (the control plane process, all its threads,
user and system, vs this process for bare), and gRPC's own floor: the same calls to an echo
handler over the same TLS (what any Python gRPC CA pays before signing anything). The load
average is recorded before and after: the box is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import multiprocessing
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.ca_api import (
    CREATE_CERTIFICATE,
    IstioCertificateRequest,
    IstioCertificateResponse,
)
from meshpilot.security.certs import Signer, new_key
from meshpilot.security.identity import SpiffeId
from meshpilot.security.tokens import TokenAuthority

TD = "cluster.local"
REPO = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


RSA_POOL = 32  # distinct RSA 2048 keys: generating 4000 would take minutes


def _make_csrs(count: int, kind: str = "ecdsa") -> list[tuple[str, str, str]]:
    """(namespace, service account, CSR PEM) for `count` simulated pods; kind: ecdsa
    (P-256, one key per pod) or rsa (2048 bits, keys reused round-robin)."""
    pool = [rsa.generate_private_key(65537, 2048) for _ in range(RSA_POOL)] if kind == "rsa" else []
    out = []
    for i in range(count):
        ns, sa = f"ns-{i % 50}", f"sa-{i % 200}"
        name = x509.UniformResourceIdentifier(f"spiffe://{TD}/ns/{ns}/sa/{sa}")
        key = pool[i % len(pool)] if pool else new_key()
        csr = (
            x509.CertificateSigningRequestBuilder()
            .subject_name(x509.Name([]))
            .add_extension(x509.SubjectAlternativeName([name]), critical=True)
            .sign(key, hashes.SHA256())
        )
        out.append((ns, sa, csr.public_bytes(serialization.Encoding.PEM).decode()))
    return out


def bare_sign(signer: Signer, csr_pem: str) -> bytes:
    """The least a CA must do per CSR, with cryptography alone."""
    csr = x509.load_pem_x509_csr(csr_pem.encode())
    if not csr.is_signature_valid:
        raise ValueError("bad CSR signature")
    san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(signer.cert.subject)
        .public_key(csr.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(hours=24))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(san, critical=True)
        .sign(signer.key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class Rate:
    per_s: float  # wall clock
    cpu_per_cert: float  # seconds of this process's CPU


def _bare(signer: Signer, csrs: list[tuple[str, str, str]]) -> Rate:
    start, cpu = time.perf_counter(), time.process_time()
    for _, _, pem in csrs:
        bare_sign(signer, pem)
    cpu = time.process_time() - cpu
    return Rate(len(csrs) / (time.perf_counter() - start), cpu / len(csrs))


def _ours(ca: CertificateAuthority, csrs: list[tuple[str, str, str]]) -> Rate:
    """Our CA's sign() in process: the endpoint minus gRPC, TLS and the token check."""
    start, cpu = time.perf_counter(), time.process_time()
    for ns, sa, pem in csrs:
        ca.sign(pem, SpiffeId(TD, ns, sa))
    cpu = time.process_time() - cpu
    return Rate(len(csrs) / (time.perf_counter() - start), cpu / len(csrs))


async def _client(
    port: int, root: bytes, work: list[tuple[str, str]], concurrency: int, method: str
) -> list[float]:
    creds = grpc.ssl_channel_credentials(root)
    options = [("grpc.ssl_target_name_override", "istiod.istio-system.svc")]
    latencies: list[float] = []
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", creds, options=options) as chan:
        call = chan.unary_unary(
            method,
            request_serializer=IstioCertificateRequest.SerializeToString,
            response_deserializer=IstioCertificateResponse.FromString,
        )
        await chan.channel_ready()
        queue = list(reversed(work))

        async def worker() -> None:
            while queue:
                token, csr = queue.pop()
                started = time.perf_counter()
                response: Any = await call(
                    IstioCertificateRequest(csr=csr, validity_duration=86400),
                    metadata=[("authorization", f"Bearer {token}")],
                    timeout=60,
                )
                latencies.append(time.perf_counter() - started)
                assert len(response.cert_chain) == 2

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def _client_process(
    port: int,
    root: bytes,
    work: list[tuple[str, str]],
    concurrency: int,
    method: str,
    sync: tuple[Any, Any, Any],
) -> None:
    ready, go, out = sync
    ready.set()
    go.wait()
    out.put(asyncio.run(_client(port, root, work, concurrency, method)))


@dataclass(frozen=True)
class Endpoint:
    certs_per_s: float
    server_user_per_cert: float  # seconds of the server process's CPU per certificate
    server_sys_per_cert: float
    latencies: list[float]

    @property
    def server_cpu_per_cert(self) -> float:
        return self.server_user_per_cert + self.server_sys_per_cert


def _endpoint(
    ca_dir: Path, csrs: list[tuple[str, str, str]], concurrency: int, clients: int
) -> Endpoint:
    tokens = TokenAuthority.open(ca_dir)
    work = [(tokens.issue(ns, sa, f"pod-{i}"), pem) for i, (ns, sa, pem) in enumerate(csrs)]
    port = _free_port()
    argv = [
        str(Path(sys.executable).parent / "meshpilot"), "discovery",
        "-f", str(REPO / "examples" / "bookinfo"), "--ca-dir", str(ca_dir),
        "--xds-port", "0", "--monitoring-port", "0", "--secure-port", str(port),
        "--log-level", "warning",
    ]  # fmt: skip
    root = (ca_dir / "root-cert.pem").read_bytes()
    return _drive(argv, port, root, work, concurrency, clients, CREATE_CERTIFICATE)


def _echo(
    ca: CertificateAuthority, csrs: list[tuple[str, str, str]], concurrency: int, clients: int
) -> Endpoint:
    """gRPC's own floor: the same calls over the same TLS to a handler that signs nothing
    and checks nothing, answering a fixed chain of the same size."""
    tmp = Path(tempfile.mkdtemp(prefix="meshpilot-bench-echo-"))
    creds = ca.serving_credentials(["istiod.istio-system.svc"])
    (tmp / "key").write_bytes(creds.key_pem)
    (tmp / "chain").write_bytes(creds.chain_pem)
    leaf = ca.sign(csrs[0][2], SpiffeId(TD, csrs[0][0], csrs[0][1])).chain_pem[0]
    (tmp / "leaf").write_text(leaf)
    port = _free_port()
    argv = [
        sys.executable,
        str(Path(__file__).with_name("ca_echo_server.py")),
        str(port),
        *(str(tmp / n) for n in ("key", "chain", "leaf")),
    ]
    work = [("x" * 400, pem) for _, _, pem in csrs]
    try:
        return _drive(argv, port, ca.root_pem, work, concurrency, clients, "/bench.Echo/Create")
    finally:
        for path in tmp.iterdir():
            path.unlink()
        tmp.rmdir()


def _drive(
    argv: list[str],
    port: int,
    root: bytes,
    work: list[tuple[str, str]],
    concurrency: int,
    clients: int,
    method: str,
) -> Endpoint:
    """Run the server command, then the client processes against it, all started before
    the clock; returns throughput, the server's CPU per call and the latencies."""
    server = subprocess.Popen(argv)
    try:
        _wait_port(port)
        ctx = multiprocessing.get_context("fork")
        go, out = ctx.Event(), ctx.Queue()
        procs, readies = [], []
        for share in (work[i::clients] for i in range(clients)):
            ready = ctx.Event()
            proc = ctx.Process(
                target=_client_process,
                args=(port, root, share, concurrency, method, (ready, go, out)),
            )
            proc.start()
            procs.append(proc)
            readies.append(ready)
        for ready in readies:
            ready.wait()
        time.sleep(0.2)
        user, system = _cpu_seconds(server.pid)
        start = time.perf_counter()
        go.set()
        latencies = [lat for _ in procs for lat in out.get()]
        elapsed = time.perf_counter() - start
        user_after, system_after = _cpu_seconds(server.pid)
        for proc in procs:
            proc.join()
        n = len(work)
        return Endpoint(
            n / elapsed, (user_after - user) / n, (system_after - system) / n, latencies
        )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time of a process, every thread (grpc's own included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"the control plane did not open port {port}")


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def _percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    at = {q: ordered[max(0, int(len(ordered) * q / 100) - 1)] for q in (90, 99)}
    return {
        "p50_ms": round(statistics.median(ordered) * 1e3, 2),
        "p90_ms": round(at[90] * 1e3, 2),
        "p99_ms": round(at[99] * 1e3, 2),
    }


def _kind(
    ca: CertificateAuthority, ca_dir: Path, kind: str, opts: argparse.Namespace
) -> dict[str, Any]:
    """One CSR kind: bare before and after the endpoint run (the better one counts: the box
    is shared), our sign() in process, the endpoint loaded, then one call at a time."""
    csrs = _make_csrs(opts.csrs, kind)
    _bare(ca.material.signer, csrs[: min(200, len(csrs))])  # warm-up
    before = _bare(ca.material.signer, csrs)
    ours = _ours(ca, csrs)
    endpoint = _endpoint(ca_dir, csrs, opts.concurrency, opts.clients)
    single = _endpoint(ca_dir, csrs[: opts.single], 1, 1)
    after = _bare(ca.material.signer, csrs)
    bare = max(before, after, key=lambda r: r.per_s)
    bare_cpu = min(before.cpu_per_cert, after.cpu_per_cert)
    return {
        "bare_certs_per_s": round(bare.per_s),
        "endpoint_certs_per_s": round(endpoint.certs_per_s),
        "ratio": round(endpoint.certs_per_s / bare.per_s, 3),
        "bare_cpu_us_per_cert": _us(bare_cpu),
        "ca_sign_in_process_cpu_us_per_cert": _us(ours.cpu_per_cert),
        "endpoint_server_cpu_us_per_cert": _us(endpoint.server_cpu_per_cert),
        "endpoint_server_user_us_per_cert": _us(endpoint.server_user_per_cert),
        "endpoint_server_sys_us_per_cert": _us(endpoint.server_sys_per_cert),
        "cpu_ratio": round(bare_cpu / endpoint.server_cpu_per_cert, 3),
        "loaded": _percentiles(endpoint.latencies),
        "one_at_a_time": _percentiles(single.latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csrs", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64, help="calls in flight per client")
    parser.add_argument("--clients", type=int, default=1, help="client processes")
    parser.add_argument("--single", type=int, default=300, help="calls for one-at-a-time latency")
    parser.add_argument("--kinds", default="ecdsa,rsa", help="CSR key kinds: ecdsa, rsa")
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args()
    result: dict[str, Any] = {
        "csrs": opts.csrs,
        "concurrency": opts.concurrency,
        "clients": opts.clients,
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }
    names = {"ecdsa": "ecdsa_p256", "rsa": "rsa_2048"}
    with tempfile.TemporaryDirectory(prefix="meshpilot-bench-ca-") as tmp:
        ca_dir = Path(tmp) / "ca"
        ca = CertificateAuthority.open(ca_dir)
        for kind in opts.kinds.split(","):
            result[names[kind]] = _kind(ca, ca_dir, kind, opts)
        echo = _echo(ca, _make_csrs(opts.csrs), opts.concurrency, opts.clients)
    result["grpc_echo"] = {
        "calls_per_s": round(echo.certs_per_s),
        "server_cpu_us_per_call": _us(echo.server_cpu_per_cert),
        "server_user_us_per_call": _us(echo.server_user_per_cert),
        "server_sys_us_per_call": _us(echo.server_sys_per_cert),
    }
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    result["cpus"] = os.cpu_count()
    result["python"] = platform.python_version()
    print(json.dumps(result, indent=2))
    if opts.json:
        opts.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
