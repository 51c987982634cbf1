"""VirtualService: routing rules for hosts, bound to the mesh's sidecars and/or gateways."""

from __future__ import annotations

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.duration import Duration
from meshpilot.config.istio.common import PortSelector, StringMatch
from meshpilot.config.ranges import Int32, UInt32

__all__ = ["HTTPRoute", "VirtualService", "VirtualServiceSpec"]


class Destination(ApiModel):
    host: str
    subset: str = ""
    port: PortSelector | None = None


class HTTPMatchRequest(ApiModel):
    name: str = ""
    uri: StringMatch | None = None
    scheme: StringMatch | None = None
    method: StringMatch | None = None
    authority: StringMatch | None = None
    headers: dict[str, StringMatch] = Field(default_factory=dict)
    port: int = 0
    source_labels: dict[str, str] = Field(default_factory=dict)
    gateways: list[str] = Field(default_factory=list)
    query_params: dict[str, StringMatch] = Field(default_factory=dict)
    ignore_uri_case: bool = False
    without_headers: dict[str, StringMatch] = Field(default_factory=dict)
    source_namespace: str = ""
    stat_prefix: str = ""


class HeaderOperations(ApiModel):
    set: dict[str, str] = Field(default_factory=dict)
    add: dict[str, str] = Field(default_factory=dict)
    remove: list[str] = Field(default_factory=list)


class Headers(ApiModel):
    request: HeaderOperations | None = None
    response: HeaderOperations | None = None


class HTTPRouteDestination(ApiModel):
    destination: Destination
    weight: Int32 = 0
    headers: Headers | None = None


class HTTPRedirect(ApiModel):
    uri: str = ""
    authority: str = ""
    port: int = 0
    derive_port: str = ""
    scheme: str = ""
    redirect_code: UInt32 = 0


class RegexRewrite(ApiModel):
    match: str
    rewrite: str


class HTTPRewrite(ApiModel):
    uri: str = ""
    authority: str = ""
    uri_regex_rewrite: RegexRewrite | None = None


class HTTPDirectResponseBody(ApiModel):
    string: str | None = None
    bytes: str | None = None


class HTTPDirectResponse(ApiModel):
    status: UInt32
    body: HTTPDirectResponseBody | None = None


class HTTPRetry(ApiModel):
    attempts: Int32 = 0
    per_try_timeout: Duration | None = None
    retry_on: str = ""
    retry_remote_localities: bool | None = None
    retry_ignore_previous_hosts: bool | None = None
    backoff: Duration | None = None


class Percent(ApiModel):
    value: float = 0.0


class FaultDelay(ApiModel):
    fixed_delay: Duration | None = None
    exponential_delay: Duration | None = None
    percentage: Percent | None = None
    percent: Int32 | None = None


class FaultAbort(ApiModel):
    http_status: Int32 | None = None
    grpc_status: str | None = None
    http2_error: str | None = None
    percentage: Percent | None = None


class HTTPFaultInjection(ApiModel):
    delay: FaultDelay | None = None
    abort: FaultAbort | None = None


class CorsPolicy(ApiModel):
    allow_origin: list[str] = Field(default_factory=list)
    allow_origins: list[StringMatch] = Field(default_factory=list)
    allow_methods: list[str] = Field(default_factory=list)
    allow_headers: list[str] = Field(default_factory=list)
    expose_headers: list[str] = Field(default_factory=list)
    max_age: Duration | None = None
    allow_credentials: bool | None = None
    unmatched_preflights: str = ""


class Delegate(ApiModel):
    name: str
    namespace: str = ""


class HTTPMirrorPolicy(ApiModel):
    destination: Destination
    percentage: Percent | None = None


class HTTPRoute(ApiModel):
    name: str = ""
    match: list[HTTPMatchRequest] = Field(default_factory=list)
    route: list[HTTPRouteDestination] = Field(default_factory=list)
    redirect: HTTPRedirect | None = None
    direct_response: HTTPDirectResponse | None = None
    delegate: Delegate | None = None
    rewrite: HTTPRewrite | None = None
    timeout: Duration | None = None
    retries: HTTPRetry | None = None
    fault: HTTPFaultInjection | None = None
    mirror: Destination | None = None
    mirrors: list[HTTPMirrorPolicy] = Field(default_factory=list)
    mirror_percentage: Percent | None = None
    mirror_percent: UInt32 | None = None
    cors_policy: CorsPolicy | None = None
    headers: Headers | None = None


class L4MatchAttributes(ApiModel):
    destination_subnets: list[str] = Field(default_factory=list)
    port: int = 0
    source_labels: dict[str, str] = Field(default_factory=dict)
    gateways: list[str] = Field(default_factory=list)
    source_namespace: str = ""
    source_subnet: str = ""


class TLSMatchAttributes(ApiModel):
    sni_hosts: list[str]
    destination_subnets: list[str] = Field(default_factory=list)
    port: int = 0
    source_labels: dict[str, str] = Field(default_factory=dict)
    gateways: list[str] = Field(default_factory=list)
    source_namespace: str = ""


class RouteDestination(ApiModel):
    destination: Destination
    weight: Int32 = 0


class TCPRoute(ApiModel):
    match: list[L4MatchAttributes] = Field(default_factory=list)
    route: list[RouteDestination] = Field(default_factory=list)


class TLSRoute(ApiModel):
    match: list[TLSMatchAttributes]
    route: list[RouteDestination] = Field(default_factory=list)


class VirtualServiceSpec(ApiModel):
    hosts: list[str] = Field(default_factory=list)
    gateways: list[str] = Field(default_factory=list)
    http: list[HTTPRoute] = Field(default_factory=list)
    tls: list[TLSRoute] = Field(default_factory=list)
    tcp: list[TCPRoute] = Field(default_factory=list)
    export_to: list[str] = Field(default_factory=list)


class VirtualService(TopLevel):
    spec: VirtualServiceSpec
