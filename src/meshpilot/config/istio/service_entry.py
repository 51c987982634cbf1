"""ServiceEntry and WorkloadEntry: services and workloads outside Kubernetes' registry."""

from __future__ import annotations

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.istio.common import NetworkingWorkloadSelector
from meshpilot.config.ranges import UInt32

__all__ = ["SEPort", "ServiceEntry", "ServiceEntrySpec", "WorkloadEntry", "WorkloadEntrySpec"]


class SEPort(ApiModel):
    number: int
    protocol: str = ""
    name: str
    target_port: int = 0


class WorkloadEntrySpec(ApiModel):
    address: str = ""
    ports: dict[str, int] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    network: str = ""
    locality: str = ""
    weight: UInt32 = 0
    service_account: str = ""


class ServiceEntrySpec(ApiModel):
    hosts: list[str]
    addresses: list[str] = Field(default_factory=list)
    ports: list[SEPort] = Field(default_factory=list)
    location: str = "MESH_EXTERNAL"
    resolution: str = "NONE"
    endpoints: list[WorkloadEntrySpec] = Field(default_factory=list)
    workload_selector: NetworkingWorkloadSelector | None = None
    export_to: list[str] = Field(default_factory=list)
    subject_alt_names: list[str] = Field(default_factory=list)


class ServiceEntry(TopLevel):
    spec: ServiceEntrySpec


class WorkloadEntry(TopLevel):
    spec: WorkloadEntrySpec
