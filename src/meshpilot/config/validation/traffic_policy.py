"""DestinationRule traffic policies: load balancing, connection pools, outlier detection,
client TLS, per-port settings, tunnels (Istio's validateTrafficPolicy and its helpers,
agent.ValidateTLS and agent.ValidateLocalityLbSetting)."""

from __future__ import annotations

from meshpilot.config.istio.destination_rule import (
    ClientTLSSettings,
    ConnectionPoolSettings,
    LoadBalancerSettings,
    OutlierDetection,
    PortTrafficPolicy,
    TrafficPolicy,
)
from meshpilot.config.ranges import UINT32_MAX
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_duration,
    check_enum,
    check_non_negative,
    check_percent,
    check_port,
    fqdn_error,
    is_ip,
    quoted,
)
from meshpilot.config.validation.locality import check_locality_lb, check_outlier_for_failover

__all__ = ["check_client_tls", "check_connection_pool", "check_traffic_policy"]

LB_SIMPLE = ("UNSPECIFIED", "RANDOM", "PASSTHROUGH", "ROUND_ROBIN", "LEAST_REQUEST", "LEAST_CONN")
TLS_MODES = ("DISABLE", "SIMPLE", "MUTUAL", "ISTIO_MUTUAL")
H2_UPGRADE = ("DEFAULT", "DO_NOT_UPGRADE", "UPGRADE")
_MAGLEV_MAX = 5_000_011
_RING_MAX = 8_388_608  # Envoy RingHashLbConfig.minimum_ring_size (lte)


def check_traffic_policy(p: Problems, path: Path, policy: TrafficPolicy | None) -> None:
    if policy is None:
        return
    settings = (
        policy.load_balancer,
        policy.connection_pool,
        policy.outlier_detection,
        policy.tls,
        policy.tunnel,
        policy.proxy_protocol,
    )
    if all(s is None for s in settings) and not policy.port_level_settings:
        p.error(path, "traffic policy must have at least one field")
        return
    if policy.tunnel is not None and policy.proxy_protocol is not None:
        p.error(path, "tunnel and proxyProtocol must not be set together")
    _check_settings(p, path, policy)
    seen: dict[int, int] = {}
    for index, port_policy in enumerate(policy.port_level_settings):
        _check_port_policy(p, (*path, "portLevelSettings", index), port_policy, seen, index)
    if policy.tunnel is not None:
        _check_tunnel(p, (*path, "tunnel"), policy)
    if policy.proxy_protocol is not None and policy.proxy_protocol.version:
        check_enum(
            p, (*path, "proxyProtocol", "version"), policy.proxy_protocol.version, ("V1", "V2")
        )


def _check_settings(p: Problems, path: Path, policy: TrafficPolicy | PortTrafficPolicy) -> None:
    _check_outlier(p, (*path, "outlierDetection"), policy.outlier_detection)
    check_connection_pool(p, (*path, "connectionPool"), policy.connection_pool)
    _check_lb(p, (*path, "loadBalancer"), policy.load_balancer, policy.outlier_detection)
    check_client_tls(p, (*path, "tls"), policy.tls)


def _check_port_policy(
    p: Problems, path: Path, policy: PortTrafficPolicy, seen: dict[int, int], index: int
) -> None:
    if policy.port is None:
        p.error(path, "port level settings must have a port")
    else:
        number = policy.port.number
        check_port(p, (*path, "port", "number"), number)
        if number in seen:
            p.error(
                (*path, "port", "number"),
                f"duplicate port level settings for port {number} "
                f"(also in portLevelSettings[{seen[number]}])",
            )
        seen.setdefault(number, index)
    settings = (policy.load_balancer, policy.connection_pool, policy.outlier_detection, policy.tls)
    if all(s is None for s in settings):
        p.error(path, "port traffic policy must have at least one field")
    _check_settings(p, path, policy)


def _check_tunnel(p: Problems, path: Path, policy: TrafficPolicy) -> None:
    tunnel = policy.tunnel
    assert tunnel is not None
    if tunnel.protocol and tunnel.protocol not in ("CONNECT", "POST"):
        p.error((*path, "protocol"), 'tunnel protocol must be "CONNECT" or "POST"')
    if fqdn_error(tunnel.target_host) is not None and not is_ip(tunnel.target_host):
        p.error(
            (*path, "targetHost"),
            f"tunnel target host {quoted(tunnel.target_host)} must be a valid FQDN or IP address",
        )
    check_port(p, (*path, "targetPort"), tunnel.target_port)


def _check_outlier(p: Problems, path: Path, outlier: OutlierDetection | None) -> None:
    if outlier is None:
        return
    check_duration(p, (*path, "baseEjectionTime"), outlier.base_ejection_time)
    check_duration(p, (*path, "interval"), outlier.interval)
    if outlier.consecutive_errors:
        p.warning(
            (*path, "consecutiveErrors"),
            "outlier detection consecutiveErrors is deprecated, use consecutiveGatewayErrors "
            "or consecutive5xxErrors instead",
        )
    local = outlier.consecutive_local_origin_failures
    if local and local > 0 and not outlier.split_external_local_origin_errors:
        p.error(
            (*path, "consecutiveLocalOriginFailures"),
            "consecutiveLocalOriginFailures is set, but splitExternalLocalOriginErrors is false",
        )
    for field, value in (
        ("consecutiveLocalOriginFailures", outlier.consecutive_local_origin_failures),
        ("consecutiveGatewayErrors", outlier.consecutive_gateway_errors),
        ("consecutive5xxErrors", outlier.consecutive_5xx_errors),
        ("consecutiveErrors", outlier.consecutive_errors),
    ):
        check_non_negative(p, (*path, field), value, field)
    check_percent(p, (*path, "maxEjectionPercent"), outlier.max_ejection_percent)
    check_percent(p, (*path, "minHealthPercent"), outlier.min_health_percent)


def check_connection_pool(p: Problems, path: Path, pool: ConnectionPoolSettings | None) -> None:
    if pool is None:
        return
    if pool.http is None and pool.tcp is None:
        p.error(path, "connection pool must have at least one field")
    if (http := pool.http) is not None:
        where = (*path, "http")
        for field, value in (
            ("http1MaxPendingRequests", http.http1_max_pending_requests),
            ("http2MaxRequests", http.http2_max_requests),
            ("maxRequestsPerConnection", http.max_requests_per_connection),
            ("maxRetries", http.max_retries),
            ("maxConcurrentStreams", http.max_concurrent_streams),
        ):
            check_non_negative(p, (*where, field), value, field)
        check_duration(p, (*where, "idleTimeout"), http.idle_timeout)
        if (ping := http.http2_keep_alive) is not None:
            for field, nanos in (("interval", ping.interval), ("timeout", ping.timeout)):
                check_duration(p, (*where, "http2KeepAlive", field), nanos)
            if ping.timeout is None:  # Envoy's KeepaliveSettings requires it
                p.error((*where, "http2KeepAlive", "timeout"), "http2KeepAlive timeout is required")
        if http.h2_upgrade_policy:
            check_enum(p, (*where, "h2UpgradePolicy"), http.h2_upgrade_policy, H2_UPGRADE)
        if http.h2_upgrade_policy == "UPGRADE" and http.use_client_protocol:
            p.error(where, "useClientProtocol must not be true when h2UpgradePolicy is UPGRADE")
    if (tcp := pool.tcp) is not None:
        where = (*path, "tcp")
        check_non_negative(p, (*where, "maxConnections"), tcp.max_connections, "maxConnections")
        for field, nanos in (
            ("connectTimeout", tcp.connect_timeout),
            ("maxConnectionDuration", tcp.max_connection_duration),
            ("idleTimeout", tcp.idle_timeout),
        ):
            check_duration(p, (*where, field), nanos)
        if (keepalive := tcp.tcp_keepalive) is not None:
            check_non_negative(p, (*where, "tcpKeepalive", "probes"), keepalive.probes, "probes")
            for field, nanos in (("time", keepalive.time), ("interval", keepalive.interval)):
                check_duration(p, (*where, "tcpKeepalive", field), nanos)
                # Envoy's keepalive_time / keepalive_interval are whole seconds in a uint32.
                if nanos is not None and nanos // 1_000_000_000 > UINT32_MAX:
                    p.error(
                        (*where, "tcpKeepalive", field),
                        f"{field} is out of range: Envoy takes at most {UINT32_MAX}s",
                    )


def _check_lb(
    p: Problems, path: Path, lb: LoadBalancerSettings | None, outlier: OutlierDetection | None
) -> None:
    if lb is None:
        return
    if lb.simple is not None:
        check_enum(p, (*path, "simple"), lb.simple, LB_SIMPLE)
        if lb.consistent_hash is not None:
            p.error(path, "only one of simple or consistentHash may be set")
    if (ch := lb.consistent_hash) is not None:
        where = (*path, "consistentHash")
        keys = [
            name
            for name, value in (
                ("httpHeaderName", ch.http_header_name),
                ("httpCookie", ch.http_cookie),
                ("useSourceIp", ch.use_source_ip),
                ("httpQueryParameterName", ch.http_query_parameter_name),
            )
            if value is not None
        ]
        if len(keys) > 1:
            p.error(where, f"consistentHash may set only one hash key, got {', '.join(keys)}")
        elif not keys:
            p.warning(
                where,
                "consistentHash sets no hash key (httpHeaderName, httpCookie, useSourceIp or "
                "httpQueryParameterName), so requests are spread at random",
            )
        if ch.http_cookie is not None and not ch.http_cookie.name:
            p.error((*where, "httpCookie", "name"), "name required for httpCookie")
        _check_hash_algorithm(p, where, lb)
    check_locality_lb(p, (*path, "localityLbSetting"), lb.locality_lb_setting)
    check_outlier_for_failover(p, (*path, "localityLbSetting"), lb.locality_lb_setting, outlier)
    check_duration(p, (*path, "warmupDurationSecs"), lb.warmup_duration_secs)
    if (warmup := lb.warmup) is not None:
        where = (*path, "warmup")
        check_duration(p, (*where, "duration"), warmup.duration)
        # Envoy's SlowStartConfig: min_weight_percent is a percentage, aggression at least 1
        percent = warmup.minimum_percent
        if percent is not None and not 0 <= percent <= 100:
            p.error((*where, "minimumPercent"), f"minimumPercent {percent:g} must be in 0..100")
        if warmup.aggression is not None and not warmup.aggression >= 1:
            p.error((*where, "aggression"), f"aggression {warmup.aggression:g} must be at least 1")


def _check_hash_algorithm(p: Problems, path: Path, lb: LoadBalancerSettings) -> None:
    ch = lb.consistent_hash
    assert ch is not None
    if ch.minimum_ring_size:
        p.warning(
            (*path, "minimumRingSize"),
            "consistentHash minimumRingSize is deprecated, use ringHash instead",
        )
        if ch.ring_hash is not None or ch.maglev is not None:
            p.error(path, "only one of minimumRingSize or maglev/ringHash can be specified")
    if ch.ring_hash is not None and ch.maglev is not None:
        p.error(path, "only one of ringHash or maglev can be specified")
    for where, size in (
        ((*path, "minimumRingSize"), ch.minimum_ring_size),
        (
            (*path, "ringHash", "minimumRingSize"),
            ch.ring_hash.minimum_ring_size if ch.ring_hash else 0,
        ),
    ):
        if size > _RING_MAX:
            p.error(
                where, f"minimumRingSize {size} is out of range: Envoy takes at most {_RING_MAX}"
            )
    if (maglev := ch.maglev) is not None:
        size, where = maglev.table_size, (*path, "maglev", "tableSize")
        if size == 0:
            p.error(where, "tableSize must be set for maglev")
        elif size < 0 or size >= _MAGLEV_MAX:
            p.error(where, f"tableSize must be less than {_MAGLEV_MAX} for maglev")
        elif not _is_prime(size):
            p.error(where, f"tableSize must be a prime number for maglev (got {size})")


def _is_prime(number: int) -> bool:
    if number < 2:
        return False
    if number < 4:
        return True
    if number % 2 == 0:
        return False
    factor = 3
    while factor * factor <= number:
        if number % factor == 0:
            return False
        factor += 2
    return True


def check_client_tls(p: Problems, path: Path, tls: ClientTLSSettings | None) -> None:
    """Istio's agent.ValidateTLS for upstream (client) TLS."""
    if tls is None:
        return
    check_enum(p, (*path, "mode"), tls.mode, TLS_MODES)
    files = tls.client_certificate or tls.private_key or tls.ca_certificates or tls.ca_crl
    if tls.insecure_skip_verify:
        if tls.mode == "SIMPLE" and (tls.ca_certificates or tls.credential_name):
            p.error(
                path,
                "cannot specify caCertificates or credentialName when insecureSkipVerify is true",
            )
        if tls.mode in ("SIMPLE", "MUTUAL") and tls.subject_alt_names:
            p.error(path, "cannot specify subjectAltNames when insecureSkipVerify is true")
        if tls.mode == "MUTUAL" and tls.ca_certificates:
            p.error(path, "cannot specify caCertificates when insecureSkipVerify is true")
    if tls.mode in ("SIMPLE", "MUTUAL") and tls.credential_name:
        if files:
            p.error(
                path,
                "cannot specify client certificates or CA certificate or CA CRL "
                "if credentialName is set",
            )
        return
    if tls.mode == "MUTUAL":
        if not tls.client_certificate:
            p.error(path, "client certificate required for mutual tls (or set credentialName)")
        if not tls.private_key:
            p.error(path, "private key required for mutual tls (or set credentialName)")
