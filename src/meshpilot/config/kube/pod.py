"""Pod: the workload a sidecar or gateway proxy runs in."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel

__all__ = ["ContainerPort", "Pod"]


class ContainerPort(ApiModel):
    name: str | None = None
    container_port: int
    protocol: str = "TCP"
    host_port: int | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")


class Container(ApiModel):
    model_config = ApiModel.model_config | {"extra": "allow"}

    name: str
    image: str | None = None
    ports: list[ContainerPort] = Field(default_factory=list)


class PodSpec(ApiModel):
    # Pods carry dozens of fields meshpilot never reads; only these are typed.
    model_config = ApiModel.model_config | {"extra": "allow"}

    service_account_name: str = "default"
    service_account: str | None = None
    node_name: str | None = None
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    hostname: str | None = None
    subdomain: str | None = None


class PodStatus(ApiModel):
    model_config = ApiModel.model_config | {"extra": "allow"}

    phase: str = "Running"
    pod_ip: str | None = Field(default=None, alias="podIP")
    pod_i_ps: list[dict[str, str]] = Field(default_factory=list, alias="podIPs")
    host_ip: str | None = Field(default=None, alias="hostIP")
    conditions: list[dict[str, Any]] = Field(default_factory=list)


class Pod(TopLevel):
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()

    @property
    def service_account_name(self) -> str:
        return self.spec.service_account_name or self.spec.service_account or "default"
