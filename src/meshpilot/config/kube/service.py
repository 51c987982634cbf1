"""Service, Endpoints and EndpointSlice."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel

__all__ = ["EndpointSlice", "Endpoints", "Service", "ServicePortSpec"]


class ServicePortSpec(ApiModel):
    name: str = ""
    port: int
    target_port: int | str | None = None
    protocol: str = "TCP"
    app_protocol: str | None = None
    node_port: int | None = None


class ServiceSpec(ApiModel):
    type: str = "ClusterIP"
    selector: dict[str, str] | None = None
    ports: list[ServicePortSpec] = Field(default_factory=list)
    cluster_ip: str | None = Field(default=None, alias="clusterIP")
    cluster_ips: list[str] = Field(default_factory=list, alias="clusterIPs")
    external_name: str | None = None
    external_i_ps: list[str] = Field(default_factory=list, alias="externalIPs")
    ip_families: list[str] = Field(default_factory=list)
    ip_family_policy: str | None = None
    session_affinity: str | None = None
    session_affinity_config: dict[str, Any] | None = None
    publish_not_ready_addresses: bool | None = None
    load_balancer_ip: str | None = Field(default=None, alias="loadBalancerIP")
    external_traffic_policy: str | None = None
    internal_traffic_policy: str | None = None
    health_check_node_port: int | None = None
    allocate_load_balancer_node_ports: bool | None = None
    load_balancer_class: str | None = None
    load_balancer_source_ranges: list[str] = Field(default_factory=list)
    traffic_distribution: str | None = None


class Service(TopLevel):
    spec: ServiceSpec = ServiceSpec()
    status: dict[str, Any] = Field(default_factory=dict)


class ObjectReference(ApiModel):
    kind: str = ""
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    api_version: str = ""
    field_path: str = ""


class EndpointAddress(ApiModel):
    ip: str
    hostname: str | None = None
    node_name: str | None = None
    target_ref: ObjectReference | None = None


class EndpointPort(ApiModel):
    name: str = ""
    port: int
    protocol: str = "TCP"
    app_protocol: str | None = None


class EndpointSubset(ApiModel):
    addresses: list[EndpointAddress] = Field(default_factory=list)
    not_ready_addresses: list[EndpointAddress] = Field(default_factory=list)
    ports: list[EndpointPort] = Field(default_factory=list)


class Endpoints(TopLevel):
    subsets: list[EndpointSubset] = Field(default_factory=list)


class EndpointConditions(ApiModel):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class SliceEndpoint(ApiModel):
    addresses: list[str]
    conditions: EndpointConditions = EndpointConditions()
    hostname: str | None = None
    target_ref: ObjectReference | None = None
    node_name: str | None = None
    zone: str | None = None
    hints: dict[str, Any] | None = None
    deprecated_topology: dict[str, str] | None = None


class SlicePort(ApiModel):
    name: str | None = None
    port: int | None = None
    protocol: str = "TCP"
    app_protocol: str | None = None


class EndpointSlice(TopLevel):
    address_type: str = "IPv4"
    endpoints: list[SliceEndpoint] = Field(default_factory=list)
    ports: list[SlicePort] = Field(default_factory=list)
