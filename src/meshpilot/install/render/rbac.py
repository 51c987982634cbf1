"""istiod's ServiceAccount and RBAC: what the control plane reads cluster-wide, and the
secrets and ConfigMaps it writes in its own namespace (Istio's istio-discovery chart)."""

from __future__ import annotations

from typing import Any

from meshpilot.install.render.context import Context, K8sObject

__all__ = ["istiod_rbac"]

_READ = ["get", "list", "watch"]
_ISTIO_GROUPS = [
    "config.istio.io",
    "security.istio.io",
    "networking.istio.io",
    "authentication.istio.io",
    "rbac.istio.io",
    "telemetry.istio.io",
    "extensions.istio.io",
]


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


_CLUSTER_RULES = [
    _rule(
        ["admissionregistration.k8s.io"],
        ["mutatingwebhookconfigurations"],
        [*_READ, "update", "patch"],
    ),
    _rule(
        ["admissionregistration.k8s.io"], ["validatingwebhookconfigurations"], [*_READ, "update"]
    ),
    _rule(_ISTIO_GROUPS, ["*"], _READ),
    _rule(
        ["networking.istio.io"],
        ["workloadentries"],
        [*_READ, "create", "update", "patch", "delete"],
    ),
    _rule(_ISTIO_GROUPS, ["*/status"], [*_READ, "update", "patch"]),
    _rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], _READ),
    _rule([""], ["pods", "nodes", "services", "namespaces", "endpoints"], _READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], _READ),
    _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
    _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
    _rule(["networking.k8s.io"], ["ingresses", "ingressclasses"], _READ),
    _rule(["networking.k8s.io"], ["ingresses/status"], ["*"]),
    _rule([""], ["configmaps"], ["create", "get", "list", "watch", "update"]),
]

_ROLE_RULES = [
    _rule([""], ["secrets"], ["create", "get", "watch", "list", "update", "delete"]),
    _rule([""], ["configmaps"], ["delete"]),
    _rule(["coordination.k8s.io"], ["leases"], ["get", "update", "patch", "create"]),
]


def istiod_rbac(ctx: Context, component: str) -> list[K8sObject]:
    cluster_name = f"{ctx.suffixed('istiod-clusterrole')}-{ctx.namespace}"
    subject = [{"kind": "ServiceAccount", "name": ctx.istiod, "namespace": ctx.namespace}]
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": ctx.meta(ctx.istiod, component, app="istiod"),
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": ctx.meta(cluster_name, component, False, app="istiod"),
            "rules": _CLUSTER_RULES,
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": ctx.meta(cluster_name, component, False, app="istiod"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cluster_name,
            },
            "subjects": subject,
        },
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": ctx.meta(ctx.istiod, component, app="istiod"),
            "rules": _ROLE_RULES,
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": ctx.meta(ctx.istiod, component, app="istiod"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": ctx.istiod,
            },
            "subjects": subject,
        },
    ]
