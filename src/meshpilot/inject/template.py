"""The built-in templates `sidecar` and `gateway`: each renders a partial pod (metadata,
init containers, containers, volumes) that is merged into the pod, as Istio's templates do.
A pod picks its templates with the annotation `inject.istio.io/templates` (comma list)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from meshpilot.inject.containers import init_container, interception_mode, proxy_container
from meshpilot.inject.data import InjectError, TemplateData

__all__ = ["TEMPLATES", "TEMPLATES_ANNOTATION", "render", "template_names"]

JSON = dict[str, Any]
TEMPLATES_ANNOTATION = "inject.istio.io/templates"


def volumes() -> list[JSON]:
    return [
        {"name": "workload-socket", "emptyDir": {}},
        {"name": "credential-socket", "emptyDir": {}},
        {"name": "workload-certs", "emptyDir": {}},
        {"name": "istio-envoy", "emptyDir": {"medium": "Memory"}},
        {"name": "istio-data", "emptyDir": {}},
        {
            "name": "istio-podinfo",
            "downwardAPI": {
                "items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
                ]
            },
        },
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
        {"name": "istiod-ca-cert", "configMap": {"name": "istio-ca-root-cert"}},
    ]


def canonical_labels(data: TemplateData) -> dict[str, str]:
    labels = data.labels
    name = (
        labels.get("service.istio.io/canonical-name")
        or labels.get("app.kubernetes.io/name")
        or labels.get("app")
        or data.workload.name
    )
    revision = (
        labels.get("service.istio.io/canonical-revision")
        or labels.get("app.kubernetes.io/version")
        or labels.get("version")
        or "latest"
    )
    return {
        "service.istio.io/canonical-name": name,
        "service.istio.io/canonical-revision": revision,
    }


def _pull_secrets(data: TemplateData) -> list[JSON]:
    return [{"name": name} for name in data.values.global_.image_pull_secrets]


def sidecar(data: TemplateData) -> JSON:
    labels = {
        "security.istio.io/tlsMode": data.labels.get("security.istio.io/tlsMode", "istio"),
        **canonical_labels(data),
    }
    annotations = {"istio.io/rev": data.revision or "default"}
    apps = data.app_containers
    if apps and "kubectl.kubernetes.io/default-container" not in data.annotations:
        annotations["kubectl.kubernetes.io/default-container"] = str(apps[0].get("name"))
    if apps and "kubectl.kubernetes.io/default-logs-container" not in data.annotations:
        annotations["kubectl.kubernetes.io/default-logs-container"] = str(apps[0].get("name"))
    spec: JSON = {}
    if interception_mode(data) != "NONE":
        spec["initContainers"] = [init_container(data)]
    spec["containers"] = [proxy_container(data)]
    spec["volumes"] = volumes()
    if secrets := _pull_secrets(data):
        spec["imagePullSecrets"] = secrets
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}


def gateway(data: TemplateData) -> JSON:
    labels = {**canonical_labels(data), "istio.io/rev": data.revision or "default"}
    spec: JSON = {"containers": [proxy_container(data, router=True)], "volumes": volumes()}
    if secrets := _pull_secrets(data):
        spec["imagePullSecrets"] = secrets
    return {"metadata": {"labels": labels, "annotations": {}}, "spec": spec}


TEMPLATES: dict[str, Callable[[TemplateData], JSON]] = {"sidecar": sidecar, "gateway": gateway}


def template_names(
    data: TemplateData, defaults: list[str], aliases: dict[str, list[str]] | None = None
) -> list[str]:
    text = data.annotations.get(TEMPLATES_ANNOTATION, "")
    asked = [n.strip() for n in text.split(",") if n.strip()] or list(defaults)
    names = [name for n in asked for name in (aliases or {}).get(n, [n])]
    for name in names:
        if name not in TEMPLATES:
            raise InjectError(
                f"annotation {TEMPLATES_ANNOTATION}: unknown template {name!r} "
                f"(meshpilot renders its built-in templates: {', '.join(TEMPLATES)}; "
                "custom Go templates are not supported)"
            )
    return names


def render(data: TemplateData, names: list[str]) -> list[JSON]:
    """The partial pods of the templates, in order (later ones merge over earlier ones)."""
    return [TEMPLATES[name](data) for name in names]
