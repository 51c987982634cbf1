"""Sidecar: limits what a namespace's (or selected workloads') sidecars see and accept."""

from __future__ import annotations

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.istio.common import NetworkingWorkloadSelector
from meshpilot.config.istio.destination_rule import ConnectionPoolSettings
from meshpilot.config.istio.gateway import ServerTLSSettings
from meshpilot.config.istio.virtual_service import Destination

__all__ = ["IstioEgressListener", "Sidecar", "SidecarSpec"]


class SidecarPort(ApiModel):
    number: int = 0
    protocol: str = ""
    name: str = ""
    target_port: int = 0


class IstioEgressListener(ApiModel):
    port: SidecarPort | None = None
    bind: str = ""
    capture_mode: str = ""
    hosts: list[str]


class IstioIngressListener(ApiModel):
    port: SidecarPort
    bind: str = ""
    capture_mode: str = ""
    default_endpoint: str = ""
    tls: ServerTLSSettings | None = None
    connection_pool: ConnectionPoolSettings | None = None


class OutboundTrafficPolicy(ApiModel):
    mode: str = "ALLOW_ANY"
    egress_proxy: Destination | None = None


class SidecarSpec(ApiModel):
    workload_selector: NetworkingWorkloadSelector | None = None
    ingress: list[IstioIngressListener] = Field(default_factory=list)
    egress: list[IstioEgressListener] = Field(default_factory=list)
    outbound_traffic_policy: OutboundTrafficPolicy | None = None
    inbound_connection_pool: ConnectionPoolSettings | None = None


class Sidecar(TopLevel):
    spec: SidecarSpec = SidecarSpec()
