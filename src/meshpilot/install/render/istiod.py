"""Component Pilot: istiod's Deployment, Service, PodDisruptionBudget and HPA.

The Deployment runs `meshpilot discovery` in container `discovery`; ports and names follow
Istio's istio-discovery chart (seed spec §2), with the revision as suffix and label.
"""

from __future__ import annotations

from typing import Any

from meshpilot.install.render.context import Context, K8sObject
from meshpilot.install.values import PilotValues

__all__ = ["COMPONENT", "hpa", "istiod_objects", "istiod_selector"]

COMPONENT = "Pilot"


def istiod_selector(ctx: Context) -> dict[str, str]:
    if ctx.revision:
        return {"app": "istiod", "istio.io/rev": ctx.revision}
    return {"app": "istiod", "istio": "pilot"}


def _env(ctx: Context, pilot: PilotValues) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "REVISION", "value": ctx.revision_label},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {
            "name": "SERVICE_ACCOUNT",
            "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}},
        },
        {"name": "ISTIOD_ADDR", "value": f"{ctx.istiod}.{ctx.namespace}.svc:15012"},
        {"name": "CLUSTER_ID", "value": "Kubernetes"},
    ]
    if pilot.trace_sampling is not None:
        env.append({"name": "PILOT_TRACE_SAMPLING", "value": f"{pilot.trace_sampling:g}"})
    env.extend({"name": k, "value": v} for k, v in sorted((pilot.env or {}).items()))
    return env


def _deployment(ctx: Context, pilot: PilotValues) -> K8sObject:
    component = ctx.operator.spec.components.pilot
    pod_labels = {
        **ctx.labels(COMPONENT, app="istiod", istio="pilot"),
        "sidecar.istio.io/inject": "false",
        **component.label,
    }
    annotations = {
        "prometheus.io/port": "15014",
        "prometheus.io/scrape": "true",
        "sidecar.istio.io/inject": "false",
        **(pilot.pod_annotations or {}),
    }
    container: K8sObject = {
        "name": "discovery",
        "image": ctx.image(pilot.image or "pilot", component.hub, component.tag),
        "command": ["meshpilot"],
        "args": ["discovery", "--listen-address=0.0.0.0", "--log-level=info"],
        "ports": [
            {"containerPort": port, "protocol": "TCP", "name": name}
            for port, name in (
                (15010, "grpc-xds"),
                (15012, "tls-xds"),
                (15014, "http-monitoring"),
                (15017, "https-webhooks"),
            )
        ],
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": 15014},
            "initialDelaySeconds": 1,
            "periodSeconds": 3,
            "timeoutSeconds": 5,
        },
        "env": _env(ctx, pilot),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/istio/config"}],
    }
    if pilot.resources is not None:
        container["resources"] = pilot.resources.model_dump(by_alias=True, mode="json")
    if ctx.global_values.image_pull_policy:
        container["imagePullPolicy"] = ctx.global_values.image_pull_policy
    spec: K8sObject = {
        "strategy": {"rollingUpdate": {"maxSurge": "100%", "maxUnavailable": "25%"}},
        "selector": {"matchLabels": istiod_selector(ctx)},
        "template": {
            "metadata": {"labels": pod_labels, "annotations": annotations},
            "spec": {
                "serviceAccountName": ctx.istiod,
                "containers": [container],
                "volumes": [
                    {"name": "config-volume", "configMap": {"name": ctx.suffixed("istio")}}
                ],
            },
        },
    }
    if not pilot.autoscale_enabled:
        spec = {"replicas": pilot.replica_count if pilot.replica_count is not None else 1, **spec}
    if pilot.node_selector:
        spec["template"]["spec"]["nodeSelector"] = dict(pilot.node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": ctx.meta(ctx.istiod, COMPONENT, app="istiod", istio="pilot"),
        "spec": spec,
    }


def _service(ctx: Context) -> K8sObject:
    ports = [
        ("grpc-xds", 15010, 15010),
        ("https-dns", 15012, 15012),
        ("https-webhook", 443, 15017),
        ("http-monitoring", 15014, 15014),
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.meta(ctx.istiod, COMPONENT, app="istiod", istio="pilot"),
        "spec": {
            "type": "ClusterIP",
            "ports": [
                {"name": n, "port": p, "protocol": "TCP", "targetPort": t} for n, p, t in ports
            ],
            "selector": istiod_selector(ctx),
        },
    }


def _pdb(ctx: Context) -> K8sObject:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": ctx.meta(ctx.istiod, COMPONENT, app="istiod", istio="pilot"),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": istiod_selector(ctx)}},
    }


def hpa(ctx: Context, name: str, component: str, low: int, high: int, cpu: int) -> K8sObject:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": ctx.meta(name, component),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": low,
            "maxReplicas": high,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": cpu},
                    },
                }
            ],
        },
    }


def istiod_objects(ctx: Context) -> list[K8sObject]:
    """istiod's workload objects (RBAC, ConfigMaps and webhooks come from their modules)."""
    pilot = ctx.values.pilot or PilotValues()
    objects = [_deployment(ctx, pilot), _service(ctx)]
    pdb = ctx.global_values.default_pod_disruption_budget or {}
    if pdb.get("enabled", True):
        objects.append(_pdb(ctx))
    if pilot.autoscale_enabled:
        cpu = (pilot.cpu or {}).get("targetAverageUtilization", 80)
        low, high = pilot.autoscale_min or 1, pilot.autoscale_max or 5
        objects.append(hpa(ctx, ctx.istiod, COMPONENT, low, max(low, high), cpu))
    return objects
