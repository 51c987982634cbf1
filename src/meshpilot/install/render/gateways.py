"""Ingress and egress gateways: one Deployment running `meshpilot proxy router` (Istio's
istio-proxy in router mode), its Service, ServiceAccount, SDS Role, PDB and HPA each, with
the component's `k8s` overlay laid on."""

from __future__ import annotations

import copy
from typing import Any

from meshpilot.install.k8s_overlay import Resources
from meshpilot.install.render.context import Context, K8sObject
from meshpilot.install.render.istiod import hpa
from meshpilot.install.render.overlay import apply_overlay
from meshpilot.install.spec import GatewayComponent
from meshpilot.install.values import Gateways, GatewayValues, ProxyValues

__all__ = ["gateway_objects"]

_PORTS = {
    "IngressGateways": [
        {"name": "status-port", "port": 15021, "protocol": "TCP", "targetPort": 15021},
        {"name": "http2", "port": 80, "protocol": "TCP", "targetPort": 8080},
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443},
    ],
    "EgressGateways": [
        {"name": "http2", "port": 80, "protocol": "TCP", "targetPort": 8080},
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443},
    ],
}


# the mesh root and the projected token the gateway's agent proves its identity with
_ROOT_CERT = "/var/run/secrets/istio/root-cert.pem"
_TOKEN_FILE = "/var/run/secrets/tokens/istio-token"
_VOLUMES = [
    {"name": "istiod-ca-cert", "configMap": {"name": "istio-ca-root-cert"}},
    {
        "name": "istio-token",
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": "istio-ca",
                        "expirationSeconds": 43200,
                        "path": "istio-token",
                    }
                }
            ]
        },
    },
]


def _labels(gateway: GatewayComponent) -> dict[str, str]:
    return {"app": gateway.name, "istio": gateway.name.removeprefix("istio-"), **gateway.label}


def _field(path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


def _container(ctx: Context, gateway: GatewayComponent, ports: list[dict[str, Any]]) -> K8sObject:
    targets = {p.get("targetPort", p["port"]) for p in ports}
    container_ports = sorted({t for t in targets if isinstance(t, int)} | {15021, 15090})
    proxy = ctx.global_values.proxy or ProxyValues()
    resources = proxy.resources or Resources(
        requests={"cpu": "100m", "memory": "128Mi"}, limits={"cpu": "2000m", "memory": "1024Mi"}
    )
    return {
        "name": "istio-proxy",
        "image": ctx.image(proxy.image or "proxyv2", gateway.hub, gateway.tag),
        "command": ["meshpilot"],
        "args": [
            "proxy",
            "router",
            f"--discovery-address={ctx.istiod}.{ctx.namespace}.svc:15012",
            f"--workload-name={gateway.name}",
            *("--root-cert", _ROOT_CERT, "--token-file", _TOKEN_FILE),
            *("--service-account", "$(SERVICE_ACCOUNT)", "--ip", "$(INSTANCE_IP)"),
        ],
        "volumeMounts": [
            {"name": "istiod-ca-cert", "mountPath": "/var/run/secrets/istio"},
            {"name": "istio-token", "mountPath": "/var/run/secrets/tokens", "readOnly": True},
        ],
        "ports": [{"containerPort": p, "protocol": "TCP"} for p in container_ports],
        "readinessProbe": {
            "httpGet": {"path": "/healthz/ready", "port": 15021, "scheme": "HTTP"},
            "initialDelaySeconds": 1,
            "periodSeconds": 2,
            "failureThreshold": 30,
        },
        "env": [
            {"name": "CA_ADDR", "value": f"{ctx.istiod}.{ctx.namespace}.svc:15012"},
            {"name": "POD_NAME", **_field("metadata.name")},
            {"name": "POD_NAMESPACE", **_field("metadata.namespace")},
            {"name": "INSTANCE_IP", **_field("status.podIP")},
            {"name": "SERVICE_ACCOUNT", **_field("spec.serviceAccountName")},
            {"name": "ISTIO_META_WORKLOAD_NAME", "value": gateway.name},
            {"name": "ISTIO_META_ROUTER_MODE", "value": "standard"},
            {"name": "ISTIO_META_CLUSTER_ID", "value": "Kubernetes"},
        ],
        "resources": resources.model_dump(by_alias=True, mode="json"),
    }


def _gateway_values(ctx: Context, gateway: GatewayComponent, kind: str) -> GatewayValues:
    gateways = ctx.values.gateways or Gateways()
    chosen = gateways.ingress if kind == "IngressGateways" else gateways.egress
    return chosen or GatewayValues()


def _one(ctx: Context, gateway: GatewayComponent, kind: str) -> list[K8sObject]:
    values = _gateway_values(ctx, gateway, kind)
    labels = _labels(gateway)
    ns = gateway.namespace or ctx.namespace
    sa = f"{gateway.name}-service-account"

    def meta(name: str) -> K8sObject:
        return {"name": name, "namespace": ns, "labels": ctx.labels(kind, **labels)}

    ports = _PORTS[kind]
    deployment_spec: K8sObject = {
        "selector": {"matchLabels": labels},
        "strategy": {"rollingUpdate": {"maxSurge": "100%", "maxUnavailable": "25%"}},
        "template": {
            "metadata": {
                "labels": {**ctx.labels(kind, **labels), "sidecar.istio.io/inject": "false"},
                "annotations": {
                    "prometheus.io/port": "15020",
                    "prometheus.io/scrape": "true",
                    "prometheus.io/path": "/stats/prometheus",
                    "sidecar.istio.io/inject": "false",
                    **(values.pod_annotations or {}),
                },
            },
            "spec": {
                "serviceAccountName": sa,
                "containers": [_container(ctx, gateway, ports)],
                "volumes": copy.deepcopy(_VOLUMES),
            },
        },
    }
    if not values.autoscale_enabled:
        deployment_spec = {"replicas": 1, **deployment_spec}
    rbac = "rbac.authorization.k8s.io/v1"
    objects: list[K8sObject] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(sa)},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(gateway.name),
            "spec": deployment_spec,
        },
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": meta(f"{gateway.name}-sds"),
            "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "watch", "list"]}
            ],
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": meta(f"{gateway.name}-sds"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": f"{gateway.name}-sds",
            },
            "subjects": [{"kind": "ServiceAccount", "name": sa}],
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta(gateway.name),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                **meta(gateway.name),
                "annotations": dict(values.service_annotations or {}),
            },
            "spec": {
                "type": values.type
                or ("LoadBalancer" if kind == "IngressGateways" else "ClusterIP"),
                "selector": labels,
                "ports": ports,
            },
        },
    ]
    if values.autoscale_enabled:
        cpu = (values.cpu or {}).get("targetAverageUtilization", 80)
        low, high = values.autoscale_min or 1, values.autoscale_max or 5
        scaler = hpa(ctx, gateway.name, kind, low, max(low, high), cpu)
        scaler["metadata"] = meta(gateway.name)
        objects.append(scaler)
    objects = apply_overlay(objects, gateway.k8s, gateway.name)
    # the overlay may change the Service's ports: the container listens on their targets
    service = next(o for o in objects if o["kind"] == "Service")
    container = objects[1]["spec"]["template"]["spec"]["containers"][0]
    container["ports"] = _container(ctx, gateway, service["spec"]["ports"])["ports"]
    if not service["metadata"]["annotations"]:
        del service["metadata"]["annotations"]
    return objects


def gateway_objects(ctx: Context, kind: str, gateways: list[GatewayComponent]) -> list[K8sObject]:
    """The objects of every enabled gateway of one list (ingress or egress)."""
    out: list[K8sObject] = []
    for gateway in gateways:
        if gateway.enabled:
            out.extend(_one(ctx, gateway, kind))
    return out
