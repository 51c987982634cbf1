"""Component Base: the Istio CRDs and the cluster-wide `istio-reader` account that
multicluster secrets use (Istio's base chart)."""

from __future__ import annotations

from meshpilot.install.crds import istio_crds
from meshpilot.install.render.context import Context, K8sObject

__all__ = ["COMPONENT", "base_objects"]

COMPONENT = "Base"


def base_objects(ctx: Context) -> list[K8sObject]:
    sa = "istio-reader-service-account"
    role = f"istio-reader-clusterrole-{ctx.namespace}"
    rbac = "rbac.authorization.k8s.io/v1"
    read = ["get", "list", "watch"]
    objects: list[K8sObject] = list(istio_crds())
    objects += [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": ctx.meta(sa, COMPONENT, app="istio-reader"),
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": ctx.meta(role, COMPONENT, False, app="istio-reader"),
            "rules": [
                {
                    "apiGroups": [
                        "config.istio.io",
                        "security.istio.io",
                        "networking.istio.io",
                        "authentication.istio.io",
                        "rbac.istio.io",
                    ],
                    "resources": ["*"],
                    "verbs": read,
                },
                {
                    "apiGroups": [""],
                    "resources": [
                        "endpoints",
                        "pods",
                        "services",
                        "nodes",
                        "replicationcontrollers",
                        "namespaces",
                        "secrets",
                    ],
                    "verbs": read,
                },
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read},
                {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": read},
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["tokenreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["subjectaccessreviews"],
                    "verbs": ["create"],
                },
            ],
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": ctx.meta(role, COMPONENT, False, app="istio-reader"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ctx.namespace}],
        },
    ]
    return objects
