"""WorkloadGroup: the template of the WorkloadEntries VMs register (validated, not applied yet)."""

from __future__ import annotations

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.istio.service_entry import WorkloadEntrySpec

__all__ = ["ReadinessProbe", "WorkloadGroup", "WorkloadGroupSpec"]


class GroupMetadata(ApiModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class HTTPHeader(ApiModel):
    name: str = ""
    value: str = ""


class HTTPHealthCheck(ApiModel):
    path: str = ""
    port: int = 0
    host: str = ""
    scheme: str = ""
    http_headers: list[HTTPHeader] = Field(default_factory=list)


class TCPHealthCheck(ApiModel):
    host: str = ""
    port: int = 0


class GrpcHealthCheck(ApiModel):
    port: int = 0
    service: str = ""


class ExecHealthCheck(ApiModel):
    command: list[str] = Field(default_factory=list)


class ReadinessProbe(ApiModel):
    initial_delay_seconds: int = 0
    timeout_seconds: int = 0
    period_seconds: int = 0
    success_threshold: int = 0
    failure_threshold: int = 0
    http_get: HTTPHealthCheck | None = None
    tcp_socket: TCPHealthCheck | None = None
    exec: ExecHealthCheck | None = None
    grpc: GrpcHealthCheck | None = None


class WorkloadGroupSpec(ApiModel):
    metadata: GroupMetadata | None = None
    template: WorkloadEntrySpec | None = None
    probe: ReadinessProbe | None = None


class WorkloadGroup(TopLevel):
    spec: WorkloadGroupSpec = WorkloadGroupSpec()
