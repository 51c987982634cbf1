"""Injection: kube-inject of a Deployment in process, and the webhook under a steady load.

    python bench/inject.py [--iterations 2000] [--rps 200] [--seconds 15] [--json FILE]

In process: `inject_object` (what `meshpilot kube-inject` runs per document) on a
Deployment with two containers, probes and ports, with Istio's default injector: median
and p99 per call.

Webhook: `meshpilot discovery --ca-dir` runs as its own process (the real command, the
webhook on its own HTTPS port, certificate from its CA) and h2load (nghttp2, Debian's
package) POSTs one AdmissionReview v1 of a Deployment's pod (as kube-apiserver sends it)
at --rps for --seconds over HTTP/1.1 + TLS, from 4 clients; the server closes each
connection after its answer, so every request pays a TLS handshake, as a webhook called
once per pod creation does. Reported from h2load's per-request log: p50/p90/p99/max and
the count of failed, errored and non-200 requests. Targets: p99 <= 20 ms, 0 errors.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from tests.unit.inject.webhook_client import review

from meshpilot.inject.config import parse_injector
from meshpilot.inject.kube_inject import inject_object

CLIENTS = 4
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "reviews", "namespace": "shop"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "reviews"}},
        "template": {
            "metadata": {
                "labels": {"app": "reviews", "version": "v2"},
                "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
            },
            "spec": {
                "serviceAccountName": "reviews",
                "containers": [
                    {
                        "name": "reviews",
                        "image": "reviews:2",
                        "ports": [{"containerPort": 9080}, {"containerPort": 9090}],
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": 9080}},
                        "livenessProbe": {"httpGet": {"path": "/live", "port": 9080}},
                        "env": [{"name": "LOG_DIR", "value": "/tmp/logs"}],
                    },
                    {"name": "log-shipper", "image": "shipper:1", "args": ["--out", "stdout"]},
                ],
            },
        },
    },
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def in_process(iterations: int) -> dict[str, float]:
    injector = parse_injector()
    for _ in range(50):  # warm up
        inject_object(DEPLOYMENT, injector, [])
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        inject_object(DEPLOYMENT, injector, [])
        times.append((time.perf_counter() - start) * 1000)
    return {
        "calls": iterations,
        "median_ms": round(statistics.median(times), 3),
        "p99_ms": round(percentile(times, 0.99), 3),
    }


def replica_set_pod() -> dict[str, Any]:
    template = DEPLOYMENT["spec"]["template"]
    meta = {
        "generateName": "reviews-7d9f8c6b5-",
        "labels": {**template["metadata"]["labels"], "pod-template-hash": "7d9f8c6b5"},
        "annotations": template["metadata"]["annotations"],
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "reviews-7d9f8c6b5",
             "uid": "1", "controller": True, "blockOwnerDeletion": True}
        ],
    }  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}


def start_discovery(work: Path) -> tuple[subprocess.Popen[bytes], int]:
    (work / "config").mkdir()
    out = work / "mwc.yaml"
    meshpilot = str(Path(sys.executable).parent / "meshpilot")
    argv = [
        meshpilot, "discovery", "-f", str(work / "config"), "--xds-port", "0",
        "--monitoring-port", "0", "--ca-dir", str(work / "ca"), "--no-front-envoy",
        "--secure-port", "0", "--mtls-port", "0", "--webhook-config-out", str(out),
        "--log-level", "warning",
    ]  # fmt: skip
    log = (work / "discovery.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while not out.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"discovery did not start: {(work / 'discovery.log').read_text()}")
        time.sleep(0.1)
    url = yaml.safe_load(out.read_text())["webhooks"][0]["clientConfig"]["url"]
    return proc, int(url.rsplit(":", 1)[1].split("/")[0])


def webhook_load(rps: int, seconds: int) -> dict[str, Any]:
    h2load = shutil.which("h2load")
    if h2load is None:
        raise SystemExit("h2load not found: apt-get install nghttp2-client")
    with tempfile.TemporaryDirectory(prefix="bench-inject-") as tmp:
        work = Path(tmp)
        body = work / "review.json"
        body.write_text(json.dumps(review(replica_set_pod(), "v1", "shop")))
        proc, port = start_discovery(work)
        try:
            per_client = max(1, rps // CLIENTS)
            total = per_client * CLIENTS * seconds
            argv = [
                h2load, "--h1", "-n", str(total), "-c", str(CLIENTS), "--rps", str(per_client),
                "-d", str(body), "-H", "content-type: application/json",
                "--log-file", str(work / "requests.log"), f"https://127.0.0.1:{port}/inject",
            ]  # fmt: skip
            result = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120)
            summary = [line for line in result.stdout.splitlines() if "requests:" in line
                       or "status codes:" in line]  # fmt: skip
            rows = [line.split("\t") for line in (work / "requests.log").read_text().splitlines()]
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
    latencies = [int(r[2]) / 1000 for r in rows if len(r) == 3]
    statuses = [int(r[1]) for r in rows if len(r) == 3]
    return {
        "target_rps": per_client * CLIENTS,
        "requests_logged": len(rows),
        "non_200": sum(1 for s in statuses if s != 200),
        "h2load": summary,
        "p50_ms": round(percentile(latencies, 0.50), 2),
        "p90_ms": round(percentile(latencies, 0.90), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "max_ms": round(max(latencies), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--rps", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = {
        "load_before": os.getloadavg(),
        "kube_inject_deployment": in_process(args.iterations),
        "webhook": webhook_load(args.rps, args.seconds),
        "load_after": os.getloadavg(),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
