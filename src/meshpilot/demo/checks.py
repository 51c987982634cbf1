"""The requests `meshpilot demo --check` sends, each judged PASS or FAIL with what came back.

Every check is a function of the running `DemoMesh` returning a `CheckResult`; the e2e tests
call the same functions (some with stricter parameters), so the demo and the tests exercise
one thing.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from meshpilot.demo.mesh import DemoMesh
from meshpilot.demo.routing import FAULT_DELAY_SECONDS, TIMEOUT_SECONDS
from meshpilot.demo.topology import (
    API_HOST,
    EGRESS_HOST,
    EGRESS_POD,
    INGRESS_HOST,
    UNREGISTERED_HOST,
)

__all__ = [
    "CHECKS",
    "CheckResult",
    "check_allow_any",
    "check_egress_direct",
    "check_egress_gateway",
    "check_fault_abort",
    "check_fault_delay",
    "check_header_match",
    "check_ingress_https",
    "check_mtls",
    "check_no_nacks",
    "check_pod_to_pod",
    "check_registry_only",
    "check_retries",
    "check_tcp",
    "check_timeout",
    "check_weighted_split",
    "https_get",
    "run_checks",
]


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    skipped: bool = False  # does not apply here (ok stays True)

    def __str__(self) -> str:
        word = "SKIP" if self.skipped else "PASS" if self.ok else "FAIL"
        return f"{word}  {self.name}: {self.detail}"


def _reviews(mesh: DemoMesh) -> str:
    return f"http://reviews:{mesh.topology.ports.http}/"


def _ratings(mesh: DemoMesh) -> str:
    return f"http://ratings:{mesh.topology.ports.http}"


def _stat_total(mesh: DemoMesh, pod: str, pattern: str) -> int:
    return sum(mesh.stats(pod, pattern).values())


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to a fixed address, with SNI and certificate checks for the host name."""

    def __init__(self, host: str, address: tuple[str, int], context: ssl.SSLContext) -> None:
        super().__init__(host, address[1], context=context, timeout=5)
        self._address = address
        self._context = context

    def connect(self) -> None:
        sock = socket.create_connection(self._address, timeout=self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def https_get(
    address: tuple[str, int],
    host: str,
    path: str,
    ca_file: Path,
    headers: dict[str, str] | None = None,
) -> tuple[int, str]:
    """GET over TLS verified against `ca_file` for `host` (ssl.SSLError if it is not)."""
    context = ssl.create_default_context(cafile=str(ca_file))
    conn = _PinnedHTTPS(host, address, context)
    try:
        conn.request("GET", path, headers={"Host": host, **(headers or {})})
        reply = conn.getresponse()
        return reply.status, reply.read().decode(errors="replace").strip()
    finally:
        conn.close()


def check_ingress_https(mesh: DemoMesh) -> CheckResult:
    assert mesh.workspace is not None
    name = "ingress: HTTPS through the gateway to productpage (and on to reviews)"
    try:
        status, body = https_get(mesh.ingress, INGRESS_HOST, "/productpage", mesh.workspace.ca_file)
    except (OSError, ssl.SSLError) as exc:
        return CheckResult(name, False, f"{type(exc).__name__}: {exc}")
    ok = status == 200 and body.startswith("productpage v1") and "-> reviews" in body
    return CheckResult(name, ok, f"{status} {body}")


_REVIEWS_SENT = (
    r"^cluster\.outbound\|\d+\|v[12]\|reviews\.default\.svc\.cluster\.local.*upstream_rq_total$"
)


def check_pod_to_pod(mesh: DemoMesh) -> CheckResult:
    """The client's sidecar routes it to a reviews subset; in pods, the reviews sidecar
    hands it to the app from 127.0.0.6 (no inbound sidecar without capture)."""
    sent = _stat_total(mesh, "client", _REVIEWS_SENT)
    status, line = mesh.get("client", _reviews(mesh))
    routed = _stat_total(mesh, "client", _REVIEWS_SENT) == sent + 1
    inbound = mesh.loopback or "from=127.0.0.6" in line
    ok = status == 200 and line.startswith("reviews ") and routed and inbound
    name = "pod to pod: client -> reviews by name, " + (
        "through the client's sidecar (no capture)" if mesh.loopback else "through both sidecars"
    )
    return CheckResult(name, ok, f"{status} {line}")


_REVIEWS_TLS = (
    # ";." : Envoy's stat scope of the transport socket match (tlsMode-istio)
    r"^cluster\.outbound\|\d+\|v[12]\|reviews\.default\.svc\.cluster\.local.*\.ssl\.handshake$"
)
CLIENT_ID = "spiffe://cluster.local/ns/default/sa/client"


def check_mtls(mesh: DemoMesh) -> CheckResult:
    """The client's sidecar speaks mTLS to the reviews sidecar with its workload
    certificate: its cluster counts TLS handshakes, and the app sees the client's SPIFFE
    id (X-Forwarded-Client-Cert from the reviews sidecar, which verified it)."""
    name = "mTLS: client -> reviews sidecar to sidecar, with SPIFFE identities"
    if mesh.loopback:
        why = "needs a sidecar at both ends (on the loopback only the client has one)"
        return CheckResult(name, True, why, skipped=True)
    status, line = mesh.get("client", _reviews(mesh))
    handshakes = _stat_total(mesh, "client", _REVIEWS_TLS)
    ok = status == 200 and line.endswith(f"caller={CLIENT_ID}") and handshakes > 0
    return CheckResult(name, ok, f"{status} {line} ({handshakes} TLS handshakes)")


def _answers(mesh: DemoMesh, pod: str, url: str, count: int, *headers: str) -> dict[str, int]:
    args = [a for h in headers for a in ("-H", h)]
    counts: dict[str, int] = mesh.client(pod, "http", url, "--count", str(count), *args)["counts"]
    return counts


def _by_version(counts: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for answer, n in counts.items():
        words = answer.split()
        key = words[2] if answer.startswith("200 reviews ") else answer
        out[key] = out.get(key, 0) + n
    return out


def check_header_match(mesh: DemoMesh, count: int = 20) -> CheckResult:
    versions = _by_version(_answers(mesh, "client", _reviews(mesh), count, "end-user: jason"))
    return CheckResult(
        "header match: end-user jason -> reviews v2", versions == {"v2": count}, str(versions)
    )


def check_weighted_split(mesh: DemoMesh, count: int = 400, tolerance: float = 0.08) -> CheckResult:
    versions = _by_version(_answers(mesh, "client", _reviews(mesh), count))
    share = versions.get("v1", 0) / count
    ok = set(versions) <= {"v1", "v2"} and abs(share - 0.8) <= tolerance
    detail = f"{versions} over {count} requests: v1 {share:.1%} (80% ±{tolerance:.0%})"
    return CheckResult("weighted split: reviews v1 80% / v2 20%", ok, detail)


def check_tcp(mesh: DemoMesh) -> CheckResult:
    reply = mesh.client("client", "tcp", "tcp-echo", str(mesh.topology.ports.tcp), "hello mesh")
    ok = reply.get("line") == "tcp-echo v1 pod=tcp-echo-v1: hello mesh"
    return CheckResult("TCP: client -> tcp-echo", ok, reply.get("line") or str(reply.get("error")))


def check_retries(mesh: DemoMesh) -> CheckResult:
    without = mesh.get("client", f"{_ratings(mesh)}/flaky", "x-demo-retries: off")
    with_retries = mesh.get("client", f"{_ratings(mesh)}/flaky")
    ok = without[0] == 503 and with_retries[0] == 200
    detail = f"without retries {without[0]}, with retries {with_retries[0]} {with_retries[1]}"
    return CheckResult("retries: a flaky upstream's 503 retried into 200", ok, detail)


def check_fault_abort(mesh: DemoMesh) -> CheckResult:
    status, line = mesh.get("client", f"{_ratings(mesh)}/", "x-demo-fault: abort")
    return CheckResult("fault abort: 418 from the sidecar", status == 418, f"{status} {line}")


def _timed(call: Callable[[], tuple[int, str]]) -> tuple[int, str, float]:
    started = time.monotonic()
    status, line = call()
    return status, line, time.monotonic() - started


def check_fault_delay(mesh: DemoMesh) -> CheckResult:
    status, _, took = _timed(
        lambda: mesh.get("client", f"{_ratings(mesh)}/", "x-demo-fault: delay")
    )
    ok = status == 200 and took >= FAULT_DELAY_SECONDS
    return CheckResult(f"fault delay: {FAULT_DELAY_SECONDS:g}s", ok, f"{status} after {took:.2f}s")


def check_timeout(mesh: DemoMesh) -> CheckResult:
    status, line, took = _timed(lambda: mesh.get("client", f"{_ratings(mesh)}/slow?ms=3000"))
    ok = status == 504 and took < 3.0
    detail = f"{status} {line} after {took:.2f}s (route timeout {TIMEOUT_SECONDS:g}s, app 3s)"
    return CheckResult("timeout: a slow answer cut off", ok, detail)


def _external(mesh: DemoMesh, host: str) -> str:
    port = mesh.topology.ports.external
    return f"http://{host}/" if port == 80 else f"http://{host}:{port}/"


_GATEWAY_RECEIVED = r"^http\.outbound_0\.0\.0\.0_\d+.*downstream_rq_total$"


def check_egress_direct(mesh: DemoMesh) -> CheckResult:
    passed = _stat_total(mesh, EGRESS_POD, _GATEWAY_RECEIVED)
    status, line = mesh.get("client", _external(mesh, API_HOST))
    direct = _stat_total(mesh, EGRESS_POD, _GATEWAY_RECEIVED) == passed
    source = mesh.loopback or f"from={mesh.ip('client')}" in line
    ok = status == 200 and API_HOST in line and direct and source
    return CheckResult(f"egress: {API_HOST} (ServiceEntry) directly", ok, f"{status} {line}")


_GATEWAY_TLS = r"^listener\.0\.0\.0\.0_\d+\.ssl\.handshake$"


def check_egress_gateway(mesh: DemoMesh) -> CheckResult:
    """The client's sidecar sends egress.external.test to the egress gateway over mTLS (its
    Gateway server is ISTIO_MUTUAL): the gateway's listener counts TLS handshakes, and the
    gateway, having verified the sidecar's certificate, tells the external server whose it
    was (X-Forwarded-Client-Cert): the client's SPIFFE id."""
    passed = _stat_total(mesh, EGRESS_POD, _GATEWAY_RECEIVED)
    status, line = mesh.get("client", _external(mesh, EGRESS_HOST))
    through = _stat_total(mesh, EGRESS_POD, _GATEWAY_RECEIVED) == passed + 1
    handshakes = _stat_total(mesh, EGRESS_POD, _GATEWAY_TLS)
    source = mesh.loopback or f"from={mesh.ip(EGRESS_POD)}" in line
    mtls = line.endswith(f"caller={CLIENT_ID}") and handshakes > 0
    ok = status == 200 and EGRESS_HOST in line and through and source and mtls
    detail = f"{status} {line} (sidecar -> egress gateway over mTLS: {handshakes} TLS handshakes)"
    return CheckResult(f"egress: {EGRESS_HOST} through the egress gateway", ok, detail)


def _needs_capture(mesh: DemoMesh, name: str) -> CheckResult | None:
    if not mesh.loopback:
        return None
    why = "needs capture (interceptionMode NONE has no passthrough, one sidecar per host)"
    return CheckResult(name, True, why, skipped=True)


def check_allow_any(mesh: DemoMesh) -> CheckResult:
    name = "ALLOW_ANY: an unregistered host passes"
    if skipped := _needs_capture(mesh, name):
        return skipped
    status, line = mesh.get("client", _external(mesh, UNREGISTERED_HOST))
    ok = status == 200 and UNREGISTERED_HOST in line
    return CheckResult(name, ok, f"{status} {line}")


def check_registry_only(mesh: DemoMesh) -> CheckResult:
    name = "REGISTRY_ONLY: client-locked blocked from unregistered hosts"
    if skipped := _needs_capture(mesh, name):
        return skipped
    blocked = mesh.get("client-locked", _external(mesh, UNREGISTERED_HOST))
    allowed = mesh.get("client-locked", _external(mesh, API_HOST))
    ok = blocked[0] == 502 and allowed[0] == 200
    detail = f"unregistered: {blocked[0]}, registered {API_HOST}: {allowed[0]}"
    return CheckResult(name, ok, detail)


def check_no_nacks(mesh: DemoMesh) -> CheckResult:
    assert mesh.control is not None
    nacks = mesh.control.nacks()
    synced = len(mesh.control.json("/debug/syncz"))
    detail = "; ".join(nacks) if nacks else f"{synced} proxies connected, every update ACKed"
    return CheckResult("control plane: no NACK from any Envoy", not nacks, detail)


CHECKS: tuple[Callable[[DemoMesh], CheckResult], ...] = (
    check_ingress_https,
    check_pod_to_pod,
    check_mtls,
    check_header_match,
    check_weighted_split,
    check_tcp,
    check_retries,
    check_fault_abort,
    check_fault_delay,
    check_timeout,
    check_egress_direct,
    check_egress_gateway,
    check_allow_any,
    check_registry_only,
    check_no_nacks,
)


def run_checks(mesh: DemoMesh, report: Callable[[CheckResult], None]) -> list[CheckResult]:
    """Every check in order (one failing does not stop the others)."""
    results = []
    for check in CHECKS:
        try:
            result = check(mesh)
        except Exception as exc:  # a check that breaks is a FAIL with its reason, not a crash
            result = CheckResult(check.__name__, False, f"{type(exc).__name__}: {exc}")
        report(result)
        results.append(result)
    return results
