"""Telemetry: metrics, tracing and access logging per workload (applied by
model/indexes/telemetry.py and xds/generate/telemetry/; TCP metrics are not built yet)."""

from __future__ import annotations

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.duration import Duration
from meshpilot.config.istio.authorization_policy import PolicyTargetReference
from meshpilot.config.istio.common import WorkloadSelector

__all__ = ["MetricsOverrides", "Telemetry", "TelemetrySpec", "Tracing"]


class ProviderRef(ApiModel):
    name: str = ""


class WorkloadModeMatch(ApiModel):
    mode: str = "CLIENT_AND_SERVER"


class NamedValue(ApiModel):
    name: str = ""
    default_value: str = ""


class LiteralValue(ApiModel):
    value: str = ""


class CustomTag(ApiModel):
    literal: LiteralValue | None = None
    environment: NamedValue | None = None
    header: NamedValue | None = None


class Tracing(ApiModel):
    match: WorkloadModeMatch | None = None
    providers: list[ProviderRef] = Field(default_factory=list)
    random_sampling_percentage: float | None = None
    disable_span_reporting: bool | None = None
    use_request_id_for_trace_sampling: bool | None = None
    custom_tags: dict[str, CustomTag | None] = Field(default_factory=dict)
    enable_istio_tags: bool | None = None


class MetricSelector(ApiModel):
    metric: str = ""
    custom_metric: str = ""
    mode: str = "CLIENT_AND_SERVER"


class TagOverride(ApiModel):
    operation: str = "UPSERT"
    value: str = ""


class MetricsOverrides(ApiModel):
    match: MetricSelector | None = None
    disabled: bool | None = None
    tag_overrides: dict[str, TagOverride] = Field(default_factory=dict)


class Metrics(ApiModel):
    providers: list[ProviderRef] = Field(default_factory=list)
    overrides: list[MetricsOverrides] = Field(default_factory=list)
    reporting_interval: Duration | None = None


class AccessLogFilter(ApiModel):
    expression: str = ""


class AccessLogging(ApiModel):
    match: WorkloadModeMatch | None = None
    providers: list[ProviderRef] = Field(default_factory=list)
    disabled: bool | None = None
    filter: AccessLogFilter | None = None


class TelemetrySpec(ApiModel):
    selector: WorkloadSelector | None = None
    target_ref: PolicyTargetReference | None = None
    target_refs: list[PolicyTargetReference] = Field(default_factory=list)
    tracing: list[Tracing] = Field(default_factory=list)
    metrics: list[Metrics] = Field(default_factory=list)
    access_logging: list[AccessLogging] = Field(default_factory=list)


class Telemetry(TopLevel):
    spec: TelemetrySpec = TelemetrySpec()
