"""B7 (CA issuance): CSRs signed through the CA endpoint vs bare in-process signing, one run.

    python bench/ca_sign.py [--csrs 4000] [--concurrency 64] [--clients 1] [--kinds ecdsa,rsa]
                            [--json FILE]

Through the endpoint: `meshpilot discovery --ca-dir` runs as its own process (the real
command) and is called on its secure port (Istio's 15012) as it starts by default: its
front Envoy terminates TLS and HTTP/2 and forwards CA calls to discovery over HTTP/1.1 on a
Unix socket (security/front_server.py); then, for comparison, the same port served by
grpc.aio itself (`--no-front-envoy`). Client processes send
IstioCertificateService/CreateCertificate with `authorization: Bearer <token>` (one token
per simulated pod), --concurrency calls in flight each, over TLS that verifies the serving
certificate.
Bare: the same CSRs signed in this process with `cryptography` alone (parse, check the
signature, build the same X.509 SVID, sign), no gRPC, no TLS, no token.

Keys and CSRs (ECDSA P-256, and RSA 2048 from a pool of 32 keys: RSA key generation would
dominate the setup) are made before the clock starts; the CA's own key is ECDSA P-256 for
both. Per CSR kind: certs/s through the endpoint and bare, the ratio (target >= 0.5), the
endpoint's p50/p90/p99 latency with --concurrency calls in flight and with one call at a
time (what a single proxy waits); target >= 500 certs/s. On a shared box wall clock drifts,
so CPU time per certificate is reported too (the control plane process and its children,
the front Envoy, all threads, user and system, vs this process for bare), and gRPC's
own floor: the same calls to an echo handler over the same TLS (what a Python gRPC CA pays
before signing anything), on grpc.aio and on grpc's thread-pool server. The load average is
recorded before and after: the box is shared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from bench.ca_drive import Endpoint, drive
from bench.ca_native import NativeRun, h2load_binary, native_drive
from meshpilot.runtime.ports import free_port
from meshpilot.security.ca import CertificateAuthority
from meshpilot.security.ca_api import (
    CREATE_CERTIFICATE,
)
from meshpilot.security.certs import Signer, new_key
from meshpilot.security.identity import SpiffeId
from meshpilot.security.tokens import TokenAuthority

TD = "cluster.local"
REPO = Path(__file__).resolve().parent.parent

NATIVE_CONNECTIONS = 4  # h2load's: the calls in flight spread over these
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


def _discovery_argv(ca_dir: Path, port: int, via: str, monitoring: int = 0) -> list[str]:
    """`meshpilot discovery` serving its secure port on `port` through its front Envoy
    (`via` "front", the default) or by grpc.aio itself ("grpc-aio")."""
    return [
        str(Path(sys.executable).parent / "meshpilot"), "discovery",
        "-f", str(REPO / "examples" / "bookinfo"), "--ca-dir", str(ca_dir),
        "--xds-port", "0", "--monitoring-port", str(monitoring), "--log-level", "warning",
        "--secure-port", str(port), *(["--no-front-envoy"] if via == "grpc-aio" else []),
    ]  # fmt: skip


def _endpoint(
    ca_dir: Path,
    csrs: list[tuple[str, str, str]],
    concurrency: int,
    clients: int,
    via: str = "front",
) -> Endpoint:
    """The secure port called by Python gRPC client processes (a token per pod)."""
    tokens = TokenAuthority.open(ca_dir)
    work = [(tokens.issue(ns, sa, f"pod-{i}"), pem) for i, (ns, sa, pem) in enumerate(csrs)]
    port = free_port()
    root = (ca_dir / "root-cert.pem").read_bytes()
    argv = _discovery_argv(ca_dir, port, via)
    return drive(argv, port, root, work, concurrency, clients, CREATE_CERTIFICATE)


def _native(ca_dir: Path, csrs: list[tuple[str, str, str]], in_flight: int, via: str) -> NativeRun:
    """The secure port loaded by h2load (bench/ca_native.py): `in_flight` calls at a time
    over NATIVE_CONNECTIONS TLS connections."""
    connections = min(NATIVE_CONNECTIONS, in_flight)
    ns, sa, pem = csrs[0]
    token = TokenAuthority.open(ca_dir).issue(ns, sa, "pod-0")
    port, monitoring = free_port(), free_port()
    argv = _discovery_argv(ca_dir, port, via, monitoring)
    return native_drive(
        argv, port, monitoring, token, pem, len(csrs), connections, in_flight // connections, ca_dir
    )


def _echo(
    ca: CertificateAuthority,
    csrs: list[tuple[str, str, str]],
    concurrency: int,
    clients: int,
    mode: str = "aio",
) -> Endpoint:
    """gRPC's own floor: the same calls over the same TLS to a handler that signs nothing
    and checks nothing, answering a fixed chain of the same size."""
    tmp = Path(tempfile.mkdtemp(prefix="meshpilot-bench-echo-"))
    creds = ca.serving_credentials(["istiod.istio-system.svc"])
    (tmp / "key").write_bytes(creds.key_pem)
    (tmp / "chain").write_bytes(creds.chain_pem)
    leaf = ca.sign(csrs[0][2], SpiffeId(TD, csrs[0][0], csrs[0][1])).chain_pem[0]
    (tmp / "leaf").write_text(leaf)
    port = free_port()
    argv = [
        sys.executable,
        str(Path(__file__).with_name("ca_echo_server.py")),
        mode,
        str(port),
        *(str(tmp / n) for n in ("key", "chain", "leaf")),
    ]
    work = [("x" * 400, pem) for _, _, pem in csrs]
    try:
        return drive(argv, port, ca.root_pem, work, concurrency, clients, "/bench.Echo/Create")
    finally:
        for path in tmp.iterdir():
            path.unlink()
        tmp.rmdir()


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


def _native_figures(
    native: dict[str, list[NativeRun]], bare: Rate, bare_cpu: float
) -> dict[str, Any]:
    """B7 with h2load as the callers: each way's faster run of two."""
    figures: dict[str, Any] = {}
    for via, done in native.items():
        if not done:
            continue
        best = max(done, key=lambda r: r.certs_per_s)
        key = "h2load_" + via.replace("-", "_")
        figures[key] = {
            "certs_per_s": round(best.certs_per_s),
            "ratio": round(best.certs_per_s / bare.per_s, 3),
            "runs_certs_per_s": [round(r.certs_per_s) for r in done],
            "server_cpu_us_per_cert": _us(best.server_cpu_per_cert),
            "envoy_us_per_cert": _us(best.children_per_cert),
            "cpu_ratio": round(bare_cpu / min(r.server_cpu_per_cert for r in done), 3),
        }
    return figures


def _kind(
    ca: CertificateAuthority, ca_dir: Path, kind: str, opts: argparse.Namespace
) -> dict[str, Any]:
    """One CSR kind: bare before and after the endpoint runs (the better one counts: the box
    is shared), our sign() in process, the secure port loaded through the front Envoy and
    served by grpc.aio (twice each, the cheaper run counts), then one call at a time."""
    csrs = _make_csrs(opts.csrs, kind)
    _bare(ca.material.signer, csrs[: min(200, len(csrs))])  # warm-up
    before = _bare(ca.material.signer, csrs)
    ours = _ours(ca, csrs)
    # Both ways twice, alternating; each keeps its cheaper run (as bare keeps its faster).
    runs: dict[str, list[Endpoint]] = {"front": [], "grpc-aio": []}
    for _ in range(2):
        for via, kept in runs.items():
            kept.append(_endpoint(ca_dir, csrs, opts.concurrency, opts.clients, via))
    endpoint, aio = (min(kept, key=lambda e: e.server_cpu_per_cert) for kept in runs.values())
    single = _endpoint(ca_dir, csrs[: opts.single], 1, 1)
    native: dict[str, list[NativeRun]] = {"front": [], "grpc-aio": []}
    if h2load_binary() is not None:
        for _ in range(2):
            for via, done in native.items():
                done.append(_native(ca_dir, csrs, opts.concurrency, via))
    after = _bare(ca.material.signer, csrs)
    bare = max(before, after, key=lambda r: r.per_s)
    bare_cpu = min(before.cpu_per_cert, after.cpu_per_cert)
    return {
        **_native_figures(native, bare, bare_cpu),
        "bare_certs_per_s": round(bare.per_s),
        "endpoint_certs_per_s": round(endpoint.certs_per_s),
        "ratio": round(endpoint.certs_per_s / bare.per_s, 3),
        "bare_cpu_us_per_cert": _us(bare_cpu),
        "ca_sign_in_process_cpu_us_per_cert": _us(ours.cpu_per_cert),
        "endpoint_server_cpu_us_per_cert": _us(endpoint.server_cpu_per_cert),
        "endpoint_server_user_us_per_cert": _us(endpoint.server_user_per_cert),
        "endpoint_server_sys_us_per_cert": _us(endpoint.server_sys_per_cert),
        "endpoint_envoy_us_per_cert": _us(endpoint.children_per_cert),
        "cpu_ratio": round(bare_cpu / endpoint.server_cpu_per_cert, 3),
        "grpc_aio_certs_per_s": round(aio.certs_per_s),
        "grpc_aio_ratio": round(aio.certs_per_s / bare.per_s, 3),
        "grpc_aio_server_cpu_us_per_cert": _us(aio.server_cpu_per_cert),
        "grpc_aio_cpu_ratio": round(bare_cpu / aio.server_cpu_per_cert, 3),
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
        echo_csrs = _make_csrs(opts.csrs)
        for mode in ("aio", "sync"):
            echo = _echo(ca, echo_csrs, opts.concurrency, opts.clients, mode)
            result[f"grpc_echo_{mode}"] = {
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
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
