"""DestinationRule: traffic policy and subsets for a host."""

from __future__ import annotations

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.duration import Duration
from meshpilot.config.istio.common import PortSelector, WorkloadSelector
from meshpilot.config.ranges import Count32, Int32, UInt32, UInt64

__all__ = ["ClientTLSSettings", "DestinationRule", "Subset", "TrafficPolicy"]


class HTTPCookie(ApiModel):
    name: str
    path: str = ""
    ttl: Duration | None = None


class MagLev(ApiModel):
    table_size: UInt64 = 0


class RingHash(ApiModel):
    minimum_ring_size: UInt64 = 0


class ConsistentHashLB(ApiModel):
    http_header_name: str | None = None
    http_cookie: HTTPCookie | None = None
    use_source_ip: bool | None = None
    http_query_parameter_name: str | None = None
    ring_hash: RingHash | None = None
    maglev: MagLev | None = None
    minimum_ring_size: UInt64 = 0


class LocalityLoadBalancerSetting(ApiModel):
    distribute: list[dict[str, object]] = Field(default_factory=list)
    failover: list[dict[str, str]] = Field(default_factory=list)
    failover_priority: list[str] = Field(default_factory=list)
    enabled: bool | None = None


class WarmupConfiguration(ApiModel):
    duration: Duration
    minimum_percent: float | None = None
    aggression: float | None = None


class LoadBalancerSettings(ApiModel):
    simple: str | None = None
    consistent_hash: ConsistentHashLB | None = None
    locality_lb_setting: LocalityLoadBalancerSetting | None = None
    warmup_duration_secs: Duration | None = None
    warmup: WarmupConfiguration | None = None


class TcpKeepalive(ApiModel):
    probes: UInt32 = 0
    time: Duration | None = None
    interval: Duration | None = None


class TCPSettings(ApiModel):
    max_connections: Count32 = 0
    connect_timeout: Duration | None = None
    tcp_keepalive: TcpKeepalive | None = None
    max_connection_duration: Duration | None = None
    idle_timeout: Duration | None = None


class Http2KeepAlive(ApiModel):
    """HTTP/2 PING keepalive on upstream connections (Envoy's connection_keepalive)."""

    interval: Duration | None = None
    timeout: Duration | None = None


class HTTPSettings(ApiModel):
    http1_max_pending_requests: Count32 = 0
    http2_max_requests: Count32 = 0
    max_requests_per_connection: Count32 = 0
    max_retries: Count32 = 0
    idle_timeout: Duration | None = None
    h2_upgrade_policy: str = ""
    use_client_protocol: bool = False
    max_concurrent_streams: Count32 = 0
    http2_keep_alive: Http2KeepAlive | None = Field(default=None, alias="http2KeepAlive")


class ConnectionPoolSettings(ApiModel):
    tcp: TCPSettings | None = None
    http: HTTPSettings | None = None


class OutlierDetection(ApiModel):
    split_external_local_origin_errors: bool = False
    consecutive_local_origin_failures: UInt32 | None = None
    consecutive_gateway_errors: UInt32 | None = None
    consecutive_5xx_errors: UInt32 | None = Field(default=None, alias="consecutive5xxErrors")
    consecutive_errors: Count32 | None = None
    interval: Duration | None = None
    base_ejection_time: Duration | None = None
    max_ejection_percent: Int32 = 0
    min_health_percent: Int32 = 0


class ClientTLSSettings(ApiModel):
    mode: str = "DISABLE"
    client_certificate: str = ""
    private_key: str = ""
    ca_certificates: str = ""
    credential_name: str = ""
    subject_alt_names: list[str] = Field(default_factory=list)
    sni: str = ""
    insecure_skip_verify: bool | None = None
    ca_crl: str = ""


class PortTrafficPolicy(ApiModel):
    port: PortSelector | None = None
    load_balancer: LoadBalancerSettings | None = None
    connection_pool: ConnectionPoolSettings | None = None
    outlier_detection: OutlierDetection | None = None
    tls: ClientTLSSettings | None = None


class TunnelSettings(ApiModel):
    protocol: str = ""
    target_host: str
    target_port: int


class ProxyProtocol(ApiModel):
    version: str = ""


class TrafficPolicy(ApiModel):
    load_balancer: LoadBalancerSettings | None = None
    connection_pool: ConnectionPoolSettings | None = None
    outlier_detection: OutlierDetection | None = None
    tls: ClientTLSSettings | None = None
    port_level_settings: list[PortTrafficPolicy] = Field(default_factory=list)
    tunnel: TunnelSettings | None = None
    proxy_protocol: ProxyProtocol | None = None


class Subset(ApiModel):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    traffic_policy: TrafficPolicy | None = None


class DestinationRuleSpec(ApiModel):
    host: str
    traffic_policy: TrafficPolicy | None = None
    subsets: list[Subset] = Field(default_factory=list)
    export_to: list[str] = Field(default_factory=list)
    workload_selector: WorkloadSelector | None = None


class DestinationRule(TopLevel):
    spec: DestinationRuleSpec
