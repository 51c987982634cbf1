"""`components.<name>.k8s`: the Kubernetes settings an IstioOperator lays onto a component.

The fields are IstioOperator's KubernetesResourcesSpec. Nested Kubernetes structures that
meshpilot copies through unchanged (affinity, tolerations, probes) stay mappings; the rest is
typed so that a wrong value is refused with its path.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from meshpilot.config.base import ApiModel

__all__ = [
    "EnvVar",
    "HpaSpec",
    "K8sOverlay",
    "PdbSpec",
    "Resources",
    "ServicePort",
    "ServiceSpec",
    "check_quantity",
]

# Kubernetes resource.Quantity: a decimal number with an optional SI/binary suffix.
_QUANTITY = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[munkMGTPE])?$")


def check_quantity(value: str | int | float) -> str | int | float:
    if isinstance(value, str) and not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 100m, 128Mi, 2)")
    return value


class Resources(ApiModel):
    requests: dict[str, str | int | float] = Field(default_factory=dict)
    limits: dict[str, str | int | float] = Field(default_factory=dict)

    @field_validator("requests", "limits")
    @classmethod
    def _quantities(cls, value: dict[str, str | int | float]) -> dict[str, str | int | float]:
        for name, quantity in value.items():
            try:
                check_quantity(quantity)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return value


class EnvVar(ApiModel):
    name: str = Field(min_length=1)
    value: str | None = None
    value_from: dict[str, Any] | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        # env values are strings in Kubernetes; YAML gives 100 or true for "100" or "true"
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value) if isinstance(value, int | float) else value


class HpaSpec(ApiModel):
    min_replicas: int | None = Field(default=None, ge=1)
    max_replicas: int = Field(default=5, ge=1)
    metrics: list[dict[str, Any]] = Field(default_factory=list)
    behavior: dict[str, Any] | None = None
    scale_target_ref: dict[str, Any] | None = None


class PdbSpec(ApiModel):
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    selector: dict[str, Any] | None = None


class ServicePort(ApiModel):
    name: str = ""
    port: int = Field(ge=1, le=65535)
    target_port: int | str | None = None
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    node_port: int | None = Field(default=None, ge=1, le=65535)
    app_protocol: str | None = None


class ServiceSpec(ApiModel):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"] | None = None
    ports: list[ServicePort] | None = None
    selector: dict[str, str] | None = None
    load_balancer_ip: str | None = Field(default=None, alias="loadBalancerIP")
    load_balancer_source_ranges: list[str] | None = None
    external_traffic_policy: Literal["Cluster", "Local"] | None = None
    session_affinity: str | None = None
    external_i_ps: list[str] | None = Field(default=None, alias="externalIPs")
    ip_families: list[str] | None = None
    ip_family_policy: str | None = None


class K8sOverlay(ApiModel):
    affinity: dict[str, Any] | None = None
    env: list[EnvVar] = Field(default_factory=list)
    hpa_spec: HpaSpec | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    pod_disruption_budget: PdbSpec | None = None
    pod_annotations: dict[str, str] = Field(default_factory=dict)
    priority_class_name: str = ""
    readiness_probe: dict[str, Any] | None = None
    replica_count: int | None = Field(default=None, ge=0)
    resources: Resources | None = None
    service: ServiceSpec | None = None
    service_annotations: dict[str, str] = Field(default_factory=dict)
    strategy: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    security_context: dict[str, Any] | None = None
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    topology_spread_constraints: list[dict[str, Any]] = Field(default_factory=list)
