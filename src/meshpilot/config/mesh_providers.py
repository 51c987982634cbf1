"""`meshConfig.extensionProviders`: the external authorizers that AuthorizationPolicies with
action CUSTOM name in `provider.name` (envoyExtAuthzHttp, envoyExtAuthzGrpc), and the tracers
and access loggers Telemetry names (mesh_telemetry.py). Provider kinds meshpilot does not
build (skywalking, ...) are kept as written and ignored."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from meshpilot.config.base import ApiModel
from meshpilot.config.duration import Duration
from meshpilot.config.mesh_telemetry import FileAccessLogProvider, TracingProvider

__all__ = ["BodyInCheck", "ExtAuthzGrpc", "ExtAuthzHttp", "ExtensionProvider"]


class BodyInCheck(ApiModel):
    """includeRequestBodyInCheck: buffer the body and send it to the authorizer."""

    max_request_bytes: int = Field(default=0, ge=0, le=2**32 - 1)
    allow_partial_message: bool = False
    pack_as_bytes: bool = False


class ExtAuthzHttp(ApiModel):
    service: str = ""
    port: int = 0
    timeout: Duration | None = None
    path_prefix: str = ""
    fail_open: bool = False
    status_on_error: str = ""
    include_request_headers_in_check: list[str] = Field(default_factory=list)
    include_headers_in_check: list[str] = Field(default_factory=list)  # deprecated spelling
    include_additional_headers_in_check: dict[str, str] = Field(default_factory=dict)
    include_request_body_in_check: BodyInCheck | None = None
    headers_to_upstream_on_allow: list[str] = Field(default_factory=list)
    headers_to_downstream_on_deny: list[str] = Field(default_factory=list)
    headers_to_downstream_on_allow: list[str] = Field(default_factory=list)


class ExtAuthzGrpc(ApiModel):
    service: str = ""
    port: int = 0
    timeout: Duration | None = None
    fail_open: bool = False
    status_on_error: str = ""
    include_request_body_in_check: BodyInCheck | None = None


_KINDS = (
    "envoy_ext_authz_http",
    "envoy_ext_authz_grpc",
    "zipkin",
    "datadog",
    "opentelemetry",
    "envoy_file_access_log",
)


class ExtensionProvider(ApiModel):
    model_config = ConfigDict(**{**ApiModel.model_config, "extra": "allow"})

    name: str = ""
    envoy_ext_authz_http: ExtAuthzHttp | None = None
    envoy_ext_authz_grpc: ExtAuthzGrpc | None = None
    zipkin: TracingProvider | None = None
    datadog: TracingProvider | None = None
    opentelemetry: TracingProvider | None = None
    envoy_file_access_log: FileAccessLogProvider | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ExtensionProvider:
        if sum(getattr(self, k) is not None for k in _KINDS) > 1:
            raise ValueError(f"extension provider {self.name!r} must set one provider kind")
        return self
