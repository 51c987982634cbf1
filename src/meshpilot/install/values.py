"""IstioOperator `spec.values`: the Helm values of Istio's charts that meshpilot reads, typed.

Unlike the injector's values (inject/values.py, which keeps unknown values so that a cluster's
ConfigMap loads as it is), an IstioOperator is written by hand: an unknown value is a typo, and
is refused with its path. Fields default to None so that a dump holds only what the profile and
the user said, as istioctl's merged values do.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from meshpilot.config.base import ApiModel
from meshpilot.install.k8s_overlay import Resources

__all__ = [
    "GatewayValues",
    "GlobalValues",
    "OperatorValues",
    "PilotValues",
    "ProxyValues",
    "WebhookValues",
]

LogLevel = Literal["trace", "debug", "info", "warning", "error", "critical", "off"]
Tracer = Literal["zipkin", "lightstep", "datadog", "stackdriver", "openCensusAgent", "none"]


class ProxyValues(ApiModel):
    image: str | None = None
    include_ip_ranges: str | None = Field(default=None, alias="includeIPRanges")
    exclude_ip_ranges: str | None = Field(default=None, alias="excludeIPRanges")
    include_inbound_ports: str | None = None
    exclude_inbound_ports: str | None = None
    include_outbound_ports: str | None = None
    exclude_outbound_ports: str | None = None
    status_port: int | None = Field(default=None, ge=0, le=65535)
    log_level: LogLevel | None = None
    component_log_level: str | None = None
    hold_application_until_proxy_starts: bool | None = None
    lifecycle: dict[str, Any] | None = None
    resources: Resources | None = None
    auto_inject: Literal["enabled", "disabled"] | None = None
    cluster_domain: str | None = None
    readiness_initial_delay_seconds: int | None = Field(default=None, ge=0)
    readiness_period_seconds: int | None = Field(default=None, ge=1)
    readiness_failure_threshold: int | None = Field(default=None, ge=1)
    privileged: bool | None = None
    tracer: Tracer | None = None
    enable_core_dump: bool | None = None
    interception_mode: Literal["REDIRECT", "TPROXY", "NONE"] | None = None


class ProxyInitValues(ApiModel):
    image: str | None = None
    resources: Resources | None = None


class SdsToken(ApiModel):
    aud: str | None = None


class Sds(ApiModel):
    token: SdsToken | None = None


class Logging(ApiModel):
    level: str | None = None


class MultiCluster(ApiModel):
    enabled: bool | None = None
    cluster_name: str | None = None


class GlobalValues(ApiModel):
    hub: str | None = None
    tag: str | int | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never", ""] | None = None
    image_pull_secrets: list[str] | None = None
    istio_namespace: str | None = None
    logging: Logging | None = None
    log_as_json: bool | None = None
    mesh_id: str | None = Field(default=None, alias="meshID")
    network: str | None = None
    multi_cluster: MultiCluster | None = None
    proxy: ProxyValues | None = None
    proxy_init: ProxyInitValues | None = Field(default=None, alias="proxy_init")
    jwt_policy: Literal["third-party-jwt", "first-party-jwt"] | None = None
    pilot_cert_provider: Literal["istiod", "kubernetes", "custom"] | None = None
    sds: Sds | None = None
    tracer: dict[str, Any] | None = None
    external_istiod: bool | None = None
    omit_sidecar_injector_config_map: bool | None = None
    config_cluster: bool | None = None
    remote_pilot_address: str | None = None
    ca_address: str | None = None
    priority_class_name: str | None = None
    default_pod_disruption_budget: dict[str, bool] | None = None
    default_node_selector: dict[str, str] | None = None
    default_resources: Resources | None = None
    istiod: dict[str, bool] | None = None


class PilotValues(ApiModel):
    enabled: bool | None = None
    image: str | None = None
    autoscale_enabled: bool | None = None
    autoscale_min: int | None = Field(default=None, ge=1)
    autoscale_max: int | None = Field(default=None, ge=1)
    replica_count: int | None = Field(default=None, ge=0)
    trace_sampling: float | None = Field(default=None, ge=0.0, le=100.0)
    env: dict[str, str] | None = None
    resources: Resources | None = None
    cpu: dict[str, int] | None = None
    node_selector: dict[str, str] | None = None
    pod_annotations: dict[str, str] | None = None
    config_map: bool | None = None
    keepalive_max_server_connection_age: str | None = None

    @field_validator("env", mode="before")
    @classmethod
    def _env_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()
            }
        return value


class WebhookValues(ApiModel):
    enable_namespaces_by_default: bool | None = None
    rewrite_app_http_probe: bool | None = Field(default=None, alias="rewriteAppHTTPProbe")
    injected_annotations: dict[str, str] | None = None
    never_inject_selector: list[dict[str, Any]] | None = None
    always_inject_selector: list[dict[str, Any]] | None = None
    default_templates: list[str] | None = None
    reinvocation_policy: Literal["Never", "IfNeeded"] | None = None


class GatewayValues(ApiModel):
    autoscale_enabled: bool | None = None
    autoscale_min: int | None = Field(default=None, ge=1)
    autoscale_max: int | None = Field(default=None, ge=1)
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] | None = None
    inject_template: str | None = None
    run_as_root: bool | None = None
    service_annotations: dict[str, str] | None = None
    pod_annotations: dict[str, str] | None = None
    cpu: dict[str, int] | None = None


class Gateways(ApiModel):
    ingress: GatewayValues | None = Field(default=None, alias="istio-ingressgateway")
    egress: GatewayValues | None = Field(default=None, alias="istio-egressgateway")
    security_context: dict[str, Any] | None = None


class MetadataExchange(ApiModel):
    wasm_enabled: bool | None = None


class PrometheusTelemetry(ApiModel):
    enabled: bool | None = None
    wasm_enabled: bool | None = None


class TelemetryV2(ApiModel):
    enabled: bool | None = None
    metadata_exchange: MetadataExchange | None = None
    prometheus: PrometheusTelemetry | None = None


class Telemetry(ApiModel):
    enabled: bool | None = None
    v2: TelemetryV2 | None = None


class BaseValues(ApiModel):
    enable_crd_templates: bool | None = Field(default=None, alias="enableCRDTemplates")
    validation_url: str | None = Field(default=None, alias="validationURL")
    enable_istio_config_crds: bool | None = Field(default=None, alias="enableIstioConfigCRDs")


class IstiodRemoteValues(ApiModel):
    injection_url: str | None = Field(default=None, alias="injectionURL")
    injection_path: str | None = None


class OperatorValues(ApiModel):
    global_: GlobalValues | None = Field(default=None, alias="global")
    pilot: PilotValues | None = None
    sidecar_injector_webhook: WebhookValues | None = None
    gateways: Gateways | None = None
    telemetry: Telemetry | None = None
    base: BaseValues | None = None
    istiod_remote: IstiodRemoteValues | None = None
    revision: str | None = None
    default_revision: str | None = None
