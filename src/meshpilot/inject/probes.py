"""App probes rewritten to the agent, as Istio's app_probe.go does.

With mTLS the kubelet cannot reach the app's HTTP, TCP or gRPC probe through the sidecar,
so each such probe is pointed at the agent's status port, path
`/app-health/<container>/readyz|livez|startupz`, and the original probe goes to the agent
in the env `ISTIO_KUBE_APP_PROBERS` (a JSON map of path to probe), which it runs on the
kubelet's behalf. Exec probes stay. `sidecar.istio.io/rewriteAppHTTPProbers: "false"` (or
values.sidecarInjectorWebhook.rewriteAppHTTPProbe false) turns the rewrite off.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["PROBERS_ENV", "REWRITE_ANNOTATION", "rewrite_probes"]

JSON = dict[str, Any]
PROBERS_ENV = "ISTIO_KUBE_APP_PROBERS"
REWRITE_ANNOTATION = "sidecar.istio.io/rewriteAppHTTPProbers"
_KINDS = (("readinessProbe", "readyz"), ("livenessProbe", "livez"), ("startupProbe", "startupz"))


def _port(port: Any, container: JSON) -> int | None:
    """A probe's port as a number: a named port is looked up in the container's ports."""
    if isinstance(port, int):
        return port
    if isinstance(port, str) and port.isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    return None


def _prober(probe: JSON, container: JSON) -> JSON | None:
    """The original probe as the agent runs it; None when it cannot be rewritten."""
    for action in ("httpGet", "tcpSocket", "grpc"):
        if isinstance(probe.get(action), dict):
            original = dict(probe[action])
            port = _port(original.get("port"), container)
            if port is None:
                return None
            original["port"] = port
            prober: JSON = {action: original}
            if probe.get("timeoutSeconds"):
                prober["timeoutSeconds"] = probe["timeoutSeconds"]
            return prober
    return None


def _rewritten(probe: JSON, path: str, status_port: int) -> JSON:
    out = {k: v for k, v in probe.items() if k not in ("httpGet", "tcpSocket", "grpc")}
    http = dict(probe["httpGet"]) if "httpGet" in probe else {}
    http.update({"path": path, "port": status_port})
    if http.get("scheme") == "HTTPS":  # the agent speaks HTTPS to the app itself
        http["scheme"] = "HTTP"
    out["httpGet"] = http
    return out


def rewrite_probes(
    containers: list[JSON], status_port: int, enabled: bool, proxy_name: str = "istio-proxy"
) -> list[str]:
    """Rewrite the app containers' probes in place and set the probers env on the proxy
    container; returns warnings (a named port that no container port declares)."""
    proxy = next((c for c in containers if c.get("name") == proxy_name), None)
    if not enabled or proxy is None:
        return []
    probers: dict[str, JSON] = {}
    warnings = []
    for container in containers:
        if container is proxy:
            continue
        for field, suffix in _KINDS:
            probe = container.get(field)
            if not isinstance(probe, dict):
                continue
            prober = _prober(probe, container)
            if prober is None:
                if "exec" not in probe:
                    warnings.append(
                        f"container {container.get('name')}: {field} names a port that the "
                        "container does not declare; left as it is"
                    )
                continue
            path = f"/app-health/{container.get('name')}/{suffix}"
            probers[path] = prober
            container[field] = _rewritten(probe, path, status_port)
    if probers:
        env = [e for e in proxy.get("env") or [] if e.get("name") != PROBERS_ENV]
        value = json.dumps(probers, sort_keys=True, separators=(",", ":"))
        env.append({"name": PROBERS_ENV, "value": value})
        proxy["env"] = env
    return warnings
