"""The demo's workloads as Kubernetes Pods, injected and started by `meshpilot run`'s runner.

Each workload is written as a Pod (its app's command, `nobody` as its user, its service
account), labelled `sidecar.istio.io/inject` as a user would ask for a sidecar (the external
server says "false": it is outside the mesh). Gateways are pods of the `gateway` template
whose own `istio-proxy` container becomes the router, with the sysctl that lets Envoy
serve ports below 1024 (as Istio's gateway charts set it). The demo's proxy settings are
the per-pod annotations a user would write: concurrency, drain times, log level, SECRET_TTL
(proxyMetadata), and the stats the checks read (statsInclusionPrefixes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from meshpilot.demo.pods import NOBODY, STATS_PREFIXES, app_argv
from meshpilot.demo.topology import Role, Workload
from meshpilot.inject.config import Injector
from meshpilot.runtime.run.workloads import PodToRun, pods_of

__all__ = ["demo_pod", "injected_pods"]

JSON = dict[str, Any]


def _proxy_config(secret_ttl: str) -> str:
    config = {
        "concurrency": 1,
        "drainDuration": "1s",
        "terminationDrainDuration": "100ms",
        "proxyMetadata": {"SECRET_TTL": secret_ttl},
    }
    return json.dumps(config, separators=(",", ":"))


def demo_pod(work: Workload, python: str, script: Path, log_level: str, secret_ttl: str) -> JSON:
    """The workload's Pod as a user would write it for a cluster with injection."""
    labels = dict(work.labels)
    annotations = {
        "proxy.istio.io/config": _proxy_config(secret_ttl),
        "sidecar.istio.io/logLevel": log_level,
        "sidecar.istio.io/statsInclusionPrefixes": ",".join(STATS_PREFIXES),
    }
    spec: JSON = {"serviceAccountName": work.app}
    if work.role is Role.ROUTER:
        labels["sidecar.istio.io/inject"] = "true"
        annotations["inject.istio.io/templates"] = "gateway"
        spec["containers"] = [{"name": "istio-proxy", "image": "auto"}]
        spec["securityContext"] = {
            "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]
        }
    else:
        labels["sidecar.istio.io/inject"] = "true" if work.has_sidecar else "false"
        app = app_argv(python, script, work)
        # a sidecar-only client has no app of its own: a container that waits
        command = list(app) if app else ["sleep", "infinity"]
        container: JSON = {"name": work.app, "command": command}
        if work.port:
            container["ports"] = [{"containerPort": work.port}]
        if work.role is not Role.EXTERNAL:  # the external server keeps root for port 80
            container["securityContext"] = {"runAsUser": NOBODY.uid, "runAsGroup": NOBODY.gid}
        spec["containers"] = [container]
    meta = {"name": work.name, "namespace": work.namespace, "labels": labels,
            "annotations": annotations}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def injected_pods(documents: list[JSON], injector: Injector) -> list[PodToRun]:
    return pods_of(documents, injector, {})
