"""What a template reads (Istio's SidecarTemplateData), built from a pod and an injector.

The pod stays Kubernetes JSON (it is the input and the output of injection, and a patch is
computed between the two); everything the templates decide from is typed here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from meshpilot.config.duration import format_duration
from meshpilot.config.mesh import MeshConfig, ProxyConfig
from meshpilot.config.yaml_load import YAMLInputError, load_yaml
from meshpilot.errors import InputError
from meshpilot.inject.config import Injector
from meshpilot.inject.values import InjectorValues

__all__ = ["InjectError", "TemplateData", "WorkloadMeta", "proxy_config_json", "template_data"]

PROXY_CONFIG_ANNOTATION = "proxy.istio.io/config"
STATUS_PORT_ANNOTATION = "status.sidecar.istio.io/port"
_DURATIONS = ("drainDuration", "terminationDrainDuration")
JSON = dict[str, Any]


class InjectError(InputError):
    """A pod cannot be injected as asked (bad annotation, unknown template)."""


@dataclass(frozen=True, slots=True)
class WorkloadMeta:
    """The object the pod comes from (Istio's TypeMeta + DeploymentMeta)."""

    api_version: str = "v1"
    kind: str = "Pod"
    name: str = ""
    namespace: str = ""

    @property
    def owner(self) -> str:
        # Istio's template writes apis/<apiVersion> for every kind, core ones included.
        kind = f"{self.kind.lower()}s"
        return (
            f"kubernetes://apis/{self.api_version}/namespaces/{self.namespace}/{kind}/{self.name}"
        )


@dataclass(frozen=True, slots=True)
class TemplateData:
    workload: WorkloadMeta
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: JSON
    proxy_config: ProxyConfig
    mesh: MeshConfig
    values: InjectorValues
    revision: str
    proxy_image: str
    warnings: list[str] = field(default_factory=list)

    def annotation(self, key: str, default: str) -> str:
        """Istio's `annotation` template function: the pod's annotation, else the default."""
        return self.annotations.get(key, default)

    @property
    def hold(self) -> bool:
        return bool(
            self.proxy_config.hold_application_until_proxy_starts
            or self.values.global_.proxy.hold_application_until_proxy_starts
        )

    @property
    def status_port(self) -> int:
        """The agent's status port: the pod's annotation, else the values, else the mesh."""
        values_port = self.values.global_.proxy.status_port
        default = values_port if values_port != 15020 else self.proxy_config.status_port
        text = self.annotation(STATUS_PORT_ANNOTATION, str(default)).strip()
        if not text.isdigit() or int(text) > 65535:
            raise InjectError(f"annotation {STATUS_PORT_ANNOTATION}: {text!r} is not a port number")
        return int(text)

    @property
    def proxy_config_json(self) -> JSON:
        return proxy_config_json(self.proxy_config)

    @property
    def app_containers(self) -> list[JSON]:
        return [c for c in self.spec.get("containers") or [] if c.get("name") != "istio-proxy"]


def proxy_config_json(config: ProxyConfig) -> JSON:
    """ProxyConfig as Istio's protoToJSON writes it (camelCase, durations as "45s")."""
    data = config.model_dump(by_alias=True, mode="json", exclude_none=True)
    for key in _DURATIONS:
        if isinstance(data.get(key), int):
            data[key] = format_duration(data[key])
    # protobuf JSON leaves out unset and zero values
    return {k: v for k, v in data.items() if v not in ({}, [], "", False)}


def _merge(base: JSON, overlay: JSON) -> JSON:
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _proxy_config(mesh: MeshConfig, injector: Injector, annotations: dict[str, str]) -> ProxyConfig:
    """The mesh's defaultConfig, the revision's istiod as discovery address unless the mesh
    names one, and the pod's `proxy.istio.io/config` annotation over both."""
    base = proxy_config_json(mesh.default_config)
    if "discovery_address" not in mesh.default_config.model_fields_set and injector.revision:
        namespace = injector.values.global_.istio_namespace
        base["discoveryAddress"] = f"istiod-{injector.revision}.{namespace}.svc:15012"
    text = annotations.get(PROXY_CONFIG_ANNOTATION)
    if text is not None:
        where = f"annotation {PROXY_CONFIG_ANNOTATION}"
        try:
            overlay = load_yaml(text, where) or {}
        except YAMLInputError as exc:
            raise InjectError(f"{where}: {exc.message}") from exc
        if not isinstance(overlay, dict):
            raise InjectError(f"{where}: must be a ProxyConfig mapping")
        base = _merge(base, overlay)
    try:
        return ProxyConfig.model_validate(base)
    except ValidationError as exc:
        err = exc.errors(include_url=False, include_input=False)[0]
        path = ".".join(str(p) for p in err["loc"])
        raise InjectError(f"annotation {PROXY_CONFIG_ANNOTATION}: {path}: {err['msg']}") from exc


def template_data(pod: JSON, workload: WorkloadMeta, injector: Injector) -> TemplateData:
    meta = pod.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    values = injector.values
    image = annotations.get("sidecar.istio.io/proxyImage") or values.image(
        values.global_.proxy.image
    )
    return TemplateData(
        workload=workload,
        labels=labels,
        annotations=annotations,
        spec=json.loads(json.dumps(pod.get("spec") or {})),
        proxy_config=_proxy_config(injector.mesh, injector, annotations),
        mesh=injector.mesh,
        values=values,
        revision=injector.revision,
        proxy_image=image,
    )
