"""The containers of Istio's templates: `istio-init` (capture) and `istio-proxy` (agent).

As in Istio's images, the injected containers give no `command`: the image's entrypoint
(`meshpilot`) runs their args, `iptables ...` and `proxy sidecar|router ...`. Every flag
given is one that `meshpilot iptables` / `meshpilot proxy` accepts; values only known at
run time come from the container's env as `$(VAR)`, which the kubelet expands.
"""

from __future__ import annotations

import json
from typing import Any

from meshpilot.inject.data import InjectError, TemplateData

__all__ = ["ENVOY_PROM_PORT", "HEALTH_PORT", "init_container", "proxy_container"]

JSON = dict[str, Any]
HEALTH_PORT = 15021
ENVOY_PROM_PORT = 15090
_TRAFFIC = "traffic.sidecar.istio.io/"
_AGENT_LEVELS = ("debug", "info", "warning", "error")
_TLS_DISCOVERY_PORT = "15012"
ROOT_CERT = "/var/run/secrets/istio/root-cert.pem"
TOKEN_FILE = "/var/run/secrets/tokens/istio-token"
LABELS_FILE = "/etc/istio/pod/labels"

MOUNTS = (
    ("workload-socket", "/var/run/secrets/workload-spiffe-uds"),
    ("credential-socket", "/var/run/secrets/credential-uds"),
    ("workload-certs", "/var/run/secrets/workload-spiffe-credentials"),
    ("istiod-ca-cert", "/var/run/secrets/istio"),
    ("istio-data", "/var/lib/istio/data"),
    ("istio-envoy", "/etc/istio/proxy"),
    ("istio-token", "/var/run/secrets/tokens"),
    ("istio-podinfo", "/etc/istio/pod"),
)


def interception_mode(data: TemplateData) -> str:
    mode = data.annotation("sidecar.istio.io/interceptionMode", data.proxy_config.interception_mode)
    if mode.upper() not in ("REDIRECT", "NONE"):
        raise InjectError(
            f"sidecar.istio.io/interceptionMode: {mode!r} is not supported by meshpilot's "
            "capture (REDIRECT or NONE)"
        )
    return mode.upper()


def excluded_inbound_ports(data: TemplateData) -> str:
    """`-d`: Envoy's own ports, the agent's status port and the excluded inbound ports
    (Istio's excludeInboundPort template function)."""
    proxy = data.values.global_.proxy
    status = str(data.status_port)
    excluded = data.annotation(_TRAFFIC + "excludeInboundPorts", proxy.exclude_inbound_ports)
    if status and status != "0" and status not in [p.strip() for p in excluded.split(",")]:
        excluded = f"{status},{excluded}" if excluded else status
    return f"{ENVOY_PROM_PORT},{HEALTH_PORT}" + (f",{excluded}" if excluded else "")


def init_container(data: TemplateData) -> JSON:
    proxy = data.values.global_.proxy
    args = [
        "iptables",
        *("-p", "15001", "-z", "15006", "-u", "1337", "-m", interception_mode(data)),
        *("-i", data.annotation(_TRAFFIC + "includeOutboundIPRanges", proxy.include_ip_ranges)),
        *("-x", data.annotation(_TRAFFIC + "excludeOutboundIPRanges", proxy.exclude_ip_ranges)),
        *("-b", data.annotation(_TRAFFIC + "includeInboundPorts", proxy.include_inbound_ports)),
        *("-d", excluded_inbound_ports(data)),
    ]
    optional = (
        ("-q", "includeOutboundPorts", proxy.include_outbound_ports),
        ("-o", "excludeOutboundPorts", proxy.exclude_outbound_ports),
        ("-k", "kubevirtInterfaces", ""),
        ("-c", "excludeInterfaces", ""),
    )
    for flag, name, default in optional:
        if _TRAFFIC + name in data.annotations or default:
            args += [flag, data.annotation(_TRAFFIC + name, default)]
    container: JSON = {
        "name": "istio-init",
        "image": data.proxy_image,
        "args": args,
        "resources": data.values.global_.proxy_init.resources,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
            "readOnlyRootFilesystem": False,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "runAsUser": 0,
        },
    }
    return _pull_policy(container, data)


def _pull_policy(container: JSON, data: TemplateData) -> JSON:
    if data.values.global_.image_pull_policy:
        container["imagePullPolicy"] = data.values.global_.image_pull_policy
    return container


def _agent_level(data: TemplateData) -> str:
    """Istio's `--log_output_level=default:info` as our agent's single level."""
    text = data.annotation("sidecar.istio.io/agentLogLevel", data.values.global_.logging.level)
    level = text.split(",")[0].rpartition(":")[2].strip().lower()
    level = {"warn": "warning", "none": "error", "fatal": "error"}.get(level, level)
    return level if level in _AGENT_LEVELS else "info"


_TERMINATION_DRAIN_DEFAULT = 5_000_000_000  # ProxyConfig's 5s: the agent's default too


def proxy_args(data: TemplateData, router: bool) -> list[str]:
    proxy = data.values.global_.proxy
    config = data.proxy_config
    level = data.annotation("sidecar.istio.io/logLevel", proxy.log_level)
    components = data.annotation("sidecar.istio.io/componentLogLevel", proxy.component_log_level)
    args = ["proxy", "router" if router else "sidecar"]
    args += ["--discovery-address", config.discovery_address]
    if config.discovery_address.rpartition(":")[2] == _TLS_DISCOVERY_PORT:
        args += ["--ca-address", "$(CA_ADDR)", "--root-cert", ROOT_CERT, "--token-file", TOKEN_FILE]
    args += ["--service-account", "$(SERVICE_ACCOUNT)", "--ip", "$(INSTANCE_IP)"]
    args += ["--labels-file", LABELS_FILE, "--workload-name", "$(ISTIO_META_WORKLOAD_NAME)"]
    args += ["--cluster-id", "$(ISTIO_META_CLUSTER_ID)"]
    if not router:
        args += ["--interception-mode", interception_mode(data)]
    if data.status_port != 15020:
        args += ["--status-port", str(data.status_port)]
    seconds = config.drain_duration // 1_000_000_000
    args += ["--drain-time-s", str(seconds)]
    args += ["--log-level", f"{level},{components}" if components else level]
    args += ["--agent-log-level", _agent_level(data)]
    if config.concurrency is not None:
        args += ["--concurrency", str(config.concurrency)]
    if config.termination_drain_duration != _TERMINATION_DRAIN_DEFAULT:
        millis = config.termination_drain_duration // 1_000_000
        args += ["--termination-drain-duration", f"{millis}ms"]
    # Istio puts these in the bootstrap's stats matcher; the agent takes them as flags
    prefixes = data.annotation("sidecar.istio.io/statsInclusionPrefixes", "")
    for prefix in (p.strip() for p in prefixes.split(",")):
        if prefix:
            args += ["--stats-inclusion-prefix", prefix]
    return args


def _field(name: str, path: str) -> JSON:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def proxy_env(data: TemplateData, router: bool) -> list[JSON]:
    values = data.values.global_
    istiod = "istiod" + (f"-{data.revision}" if data.revision else "")
    # every container the pod declares (a gateway's own istio-proxy ports included)
    ports = [p for c in data.spec.get("containers") or [] for p in c.get("ports") or []]
    env: list[JSON] = [
        {"name": "JWT_POLICY", "value": "third-party-jwt"},
        {"name": "PILOT_CERT_PROVIDER", "value": "istiod"},
        {"name": "CA_ADDR", "value": f"{istiod}.{values.istio_namespace}.svc:15012"},
        _field("POD_NAME", "metadata.name"),
        _field("POD_NAMESPACE", "metadata.namespace"),
        _field("INSTANCE_IP", "status.podIP"),
        _field("SERVICE_ACCOUNT", "spec.serviceAccountName"),
        _field("HOST_IP", "status.hostIP"),
        {
            "name": "PROXY_CONFIG",
            "value": json.dumps(data.proxy_config_json, separators=(",", ":")),
        },
        {"name": "ISTIO_META_POD_PORTS", "value": json.dumps(ports, separators=(",", ":"))},
    ]
    if not router:
        names = ",".join(str(c.get("name", "")) for c in data.app_containers)
        env.append({"name": "ISTIO_META_APP_CONTAINERS", "value": names})
    env += [
        {
            "name": "ISTIO_META_CLUSTER_ID",
            "value": values.multi_cluster.cluster_name or "Kubernetes",
        },
        _field("ISTIO_META_NODE_NAME", "spec.nodeName"),
        {"name": "ISTIO_META_INTERCEPTION_MODE", "value": interception_mode(data)},
    ]
    if values.network:
        env.append({"name": "ISTIO_META_NETWORK", "value": values.network})
    workload = data.workload
    env.append({"name": "ISTIO_META_WORKLOAD_NAME", "value": workload.name})
    if workload.name:
        env.append({"name": "ISTIO_META_OWNER", "value": workload.owner})
    trust_domain = data.mesh.trust_domain
    env.append({"name": "ISTIO_META_MESH_ID", "value": values.mesh_id or trust_domain})
    env.append({"name": "TRUST_DOMAIN", "value": trust_domain})
    for key, value in sorted(data.proxy_config.proxy_metadata.items()):
        env.append({"name": key, "value": value})
    return env


def _resources(data: TemplateData) -> JSON:
    """The proxy's resources: the per-pod annotations, when any is set, replace the values."""
    keys = {
        ("requests", "cpu"): "sidecar.istio.io/proxyCPU",
        ("requests", "memory"): "sidecar.istio.io/proxyMemory",
        ("limits", "cpu"): "sidecar.istio.io/proxyCPULimit",
        ("limits", "memory"): "sidecar.istio.io/proxyMemoryLimit",
    }
    if not any(key in data.annotations for key in keys.values()):
        return dict(data.values.global_.proxy.resources)
    out: JSON = {}
    for (section, resource), key in keys.items():
        if key in data.annotations:
            out.setdefault(section, {})[resource] = data.annotations[key]
    return out


def _lifecycle(data: TemplateData) -> JSON | None:
    """values.global.proxy.lifecycle verbatim, else the hold's postStart wait."""
    lifecycle = data.values.global_.proxy.lifecycle
    if lifecycle:
        return dict(lifecycle)
    if data.hold:
        return {"postStart": {"exec": {"command": ["meshpilot", "proxy", "wait"]}}}
    return None


def proxy_container(data: TemplateData, router: bool = False) -> JSON:
    proxy = data.values.global_.proxy
    container: JSON = {
        "name": "istio-proxy",
        "image": data.proxy_image,
        "args": proxy_args(data, router),
        "ports": [{"containerPort": ENVOY_PROM_PORT, "protocol": "TCP", "name": "http-envoy-prom"}],
        "env": proxy_env(data, router),
    }
    lifecycle = _lifecycle(data)
    if lifecycle is not None:
        container["lifecycle"] = lifecycle
    container["readinessProbe"] = {
        "httpGet": {"path": "/healthz/ready", "port": HEALTH_PORT},
        "initialDelaySeconds": proxy.readiness_initial_delay_seconds,
        "periodSeconds": proxy.readiness_period_seconds,
        "timeoutSeconds": 3,
        "failureThreshold": proxy.readiness_failure_threshold,
    }
    container["resources"] = _resources(data)
    container["securityContext"] = {
        "allowPrivilegeEscalation": proxy.privileged,
        "privileged": proxy.privileged,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsGroup": 1337,
        "runAsNonRoot": True,
        "runAsUser": 1337,
    }
    container["volumeMounts"] = [{"name": n, "mountPath": p} for n, p in MOUNTS]
    return _pull_policy(container, data)
