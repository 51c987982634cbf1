"""MeshConfig: mesh-wide settings (the `mesh` key of the istio ConfigMap, or meshconfig.yaml)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from meshpilot.config.base import ApiModel
from meshpilot.config.duration import Duration
from meshpilot.config.istio.virtual_service import HTTPRetry
from meshpilot.config.mesh_providers import ExtensionProvider
from meshpilot.config.mesh_telemetry import DefaultProviders, MeshTracing

__all__ = ["MeshConfig", "ProxyConfig"]


class OutboundTrafficPolicy(ApiModel):
    mode: str = "ALLOW_ANY"


class InboundTrafficPolicy(ApiModel):
    mode: str = "PASSTHROUGH"


class ProxyConfig(ApiModel):
    # ProxyConfig has ~40 fields; the ones meshpilot reads are typed, the rest are kept.
    model_config = ConfigDict(**{**ApiModel.model_config, "extra": "allow"})

    discovery_address: str = "istiod.istio-system.svc:15012"
    proxy_admin_port: int = 15000
    status_port: int = 15020
    concurrency: int | None = None
    drain_duration: Duration = 45_000_000_000
    termination_drain_duration: Duration = 5_000_000_000
    hold_application_until_proxy_starts: bool = False
    proxy_metadata: dict[str, str] = Field(default_factory=dict)
    interception_mode: str = "REDIRECT"
    tracing: MeshTracing | None = None


class MeshConfig(ApiModel):
    # Unknown mesh fields are reported as warnings by the loader, not refused: MeshConfig
    # is large and mostly about features meshpilot does not implement.
    model_config = ConfigDict(**{**ApiModel.model_config, "extra": "allow"})

    trust_domain: str = "cluster.local"
    trust_domain_aliases: list[str] = Field(default_factory=list)
    root_namespace: str = "istio-system"
    outbound_traffic_policy: OutboundTrafficPolicy = OutboundTrafficPolicy()
    inbound_traffic_policy: InboundTrafficPolicy = InboundTrafficPolicy()
    default_config: ProxyConfig = ProxyConfig()
    enable_auto_mtls: bool = True
    connect_timeout: Duration = 10_000_000_000
    protocol_detection_timeout: Duration = 0
    access_log_file: str = ""
    access_log_encoding: Literal["TEXT", "JSON"] = "TEXT"
    access_log_format: str = ""
    # Tracers and access loggers (telemetry), authorizers of CUSTOM AuthorizationPolicies.
    extension_providers: list[ExtensionProvider] = Field(default_factory=list)
    default_providers: DefaultProviders = DefaultProviders()
    enable_tracing: bool = False
    ingress_class: str = "istio"
    ingress_service: str = "istio-ingressgateway"
    ingress_controller_mode: str = "STRICT"
    default_service_export_to: list[str] = Field(default_factory=lambda: ["*"])
    default_virtual_service_export_to: list[str] = Field(default_factory=lambda: ["*"])
    default_destination_rule_export_to: list[str] = Field(default_factory=lambda: ["*"])
    dns_refresh_rate: Duration = 60_000_000_000
    h2_upgrade_policy: str = "DO_NOT_UPGRADE"
    locality_lb_setting: dict[str, Any] | None = None
    enable_prometheus_merge: bool = True
    tcp_keepalive: dict[str, Any] | None = None
    service_settings: list[dict[str, Any]] = Field(default_factory=list)
    # Replaces Istio's built-in retry policy for routes whose VirtualService sets none.
    default_http_retry_policy: HTTPRetry | None = None
