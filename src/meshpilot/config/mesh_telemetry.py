"""The telemetry parts of MeshConfig: the tracing and access log extension providers
(mesh_providers.py holds the provider list itself), defaultProviders and the tracing section
of ProxyConfig (defaultConfig.tracing).

Providers keep the fields meshpilot does not read (Istio's provider messages are large).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from meshpilot.config.base import ApiModel
from meshpilot.config.duration import Duration

__all__ = [
    "DefaultProviders",
    "FileAccessLogProvider",
    "MeshTracing",
    "TracingProvider",
]

_LENIENT = ConfigDict(**{**ApiModel.model_config, "extra": "allow"})


class OtlpHttp(ApiModel):
    """opentelemetry `http`: OTLP over HTTP to `path` of the collector service."""

    model_config = _LENIENT

    path: str = ""
    timeout: Duration | None = None


class TracingProvider(ApiModel):
    """zipkin, datadog and opentelemetry: a collector service (`ns/host` or host) and port."""

    model_config = _LENIENT

    service: str = ""
    port: int = 0
    max_tag_length: int = 0
    # zipkin only
    path: str = ""
    # opentelemetry only: OTLP over HTTP when set (`path`, `timeout`, `headers`), else gRPC.
    http: OtlpHttp | None = None


class LogFormat(ApiModel):
    text: str = ""
    labels: dict[str, Any] | None = None


class FileAccessLogProvider(ApiModel):
    model_config = _LENIENT

    path: str = ""
    log_format: LogFormat | None = None
    omit_empty_values: bool = False


class DefaultProviders(ApiModel):
    model_config = _LENIENT

    tracing: list[str] = Field(default_factory=list)
    access_logging: list[str] = Field(default_factory=list)
    metrics: list[str] = Field(default_factory=list)


class ZipkinAddress(ApiModel):
    model_config = _LENIENT

    address: str = ""


class TagLiteral(ApiModel):
    value: str = ""


class TagNamed(ApiModel):
    name: str = ""
    default_value: str = ""


class MeshCustomTag(ApiModel):
    literal: TagLiteral | None = None
    environment: TagNamed | None = None
    header: TagNamed | None = None


class MeshTracing(ApiModel):
    """ProxyConfig.tracing (the legacy mesh-wide settings Telemetry falls back to)."""

    model_config = _LENIENT

    zipkin: ZipkinAddress | None = None
    datadog: ZipkinAddress | None = None
    # Percent of requests traced; 0 means unset (Istio then uses PILOT_TRACE_SAMPLING, 1%).
    sampling: float = 0.0
    custom_tags: dict[str, MeshCustomTag] = Field(default_factory=dict)
    max_path_tag_length: int = 0
    enable_istio_tags: bool | None = None
