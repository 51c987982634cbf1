"""Istio's standard TCP metrics on tcp_proxy: opened and closed connections, bytes sent and
received, from Envoy's stats access logger.

The opened counter logs when the upstream connection is made (tcp_proxy's
`flush_access_log_on_connected`, entries of type TcpUpstreamConnected); the rest when the
connection ends (TcpConnectionEnd), so bytes are counted at close, not periodically as
Istio's stats filter does for long connections. Other loggers on the tcp_proxy skip the
connect-time entry. No peer exchange is possible in plain TCP: a client knows the
destination service from its cluster, a server its own facts and the client's principal
(mTLS); the rest is `unknown`.
"""

from __future__ import annotations

from envoy.config.accesslog.v3 import accesslog_pb2
from envoy.data.accesslog.v3 import accesslog_pb2 as log_data_pb2
from envoy.extensions.access_loggers.stats.v3 import stats_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from google.protobuf import wrappers_pb2

from meshpilot.model.indexes.telemetry import MetricsChoice, Mode
from meshpilot.xds.generate.telemetry.metrics import (
    STAT_PREFIX,
    STATS_LOGGER,
    UNKNOWN,
    Workload,
    labels_for,
    make_stat,
    overridden,
)
from meshpilot.xds.names import parse_cluster_name
from meshpilot.xds.protos import pack

__all__ = ["add_tcp_metrics", "cluster_service"]

_Config = stats_pb2.Config
_CONNECTED = log_data_pb2.AccessLogType.TcpUpstreamConnected
_END = log_data_pb2.AccessLogType.TcpConnectionEnd
# Istio's metric enum -> (name after STAT_PREFIX, value format; None: count 1).
_OPENED: dict[str, tuple[str, str | None]] = {
    "TCP_OPENED_CONNECTIONS": ("tcp_connections_opened_total", None)
}
_AT_END: dict[str, tuple[str, str | None]] = {
    "TCP_CLOSED_CONNECTIONS": ("tcp_connections_closed_total", None),
    "TCP_SENT_BYTES": ("tcp_sent_bytes_total", "%BYTES_SENT%"),
    "TCP_RECEIVED_BYTES": ("tcp_received_bytes_total", "%BYTES_RECEIVED%"),
}


def cluster_service(cluster: str, domain_suffix: str) -> dict[str, str]:
    """destination_service facts from an outbound cluster name (`outbound|p|s|host`)."""
    parsed = parse_cluster_name(cluster)
    if parsed is None or parsed[0] != "outbound":
        return {}
    host = parsed[3]
    parts = host.split(".")
    kube = host.endswith(f".svc.{domain_suffix}") and len(parts) >= 3
    return {
        "service": host,
        "service-name": parts[0] if kube else host,
        "service-namespace": parts[1] if kube else UNKNOWN,
    }


def _log_type(kind: int, exclude: bool = False) -> accesslog_pb2.AccessLogFilter:
    return accesslog_pb2.AccessLogFilter(
        log_type_filter=accesslog_pb2.LogTypeFilter(types=[kind], exclude=exclude)
    )


def _logger(
    metrics: dict[str, tuple[str, str | None]],
    labels: dict[str, str],
    choice: MetricsChoice,
    kind: int,
) -> accesslog_pb2.AccessLog | None:
    config = _Config(stat_prefix=STAT_PREFIX)
    for metric, (name, value) in metrics.items():
        tags = overridden(labels, metric, choice.overrides)
        if tags is None:
            continue
        counter = _Config.Counter(stat=make_stat(name, tags))
        if value is None:
            counter.value_fixed.CopyFrom(wrappers_pb2.UInt64Value(value=1))
        else:
            counter.value_format = value
        config.counters.append(counter)
    if not config.counters:
        return None
    return accesslog_pb2.AccessLog(
        name=STATS_LOGGER, filter=_log_type(kind), typed_config=pack(config)
    )


def _skip_connect_entries(log: accesslog_pb2.AccessLog) -> None:
    skip = _log_type(_CONNECTED, exclude=True)
    if log.HasField("filter"):
        both = accesslog_pb2.AndFilter(filters=[skip, log.filter])
        log.filter.CopyFrom(accesslog_pb2.AccessLogFilter(and_filter=both))
    else:
        log.filter.CopyFrom(skip)


def add_tcp_metrics(
    tcp: tcp_proxy_pb2.TcpProxy,
    own: Workload,
    principal: str,
    mode: Mode,
    security: str,
    choice: MetricsChoice,
    domain_suffix: str,
) -> None:
    """The TCP metrics loggers of one tcp_proxy (changed in place)."""
    known = cluster_service(tcp.cluster, domain_suffix) if mode is Mode.CLIENT else {}
    labels = labels_for(
        own, principal, mode, security, lambda name: known.get(name, UNKNOWN), "tcp"
    )
    loggers = [_logger(_OPENED, labels, choice, _CONNECTED), _logger(_AT_END, labels, choice, _END)]
    if loggers[0] is not None:
        for log in tcp.access_log:
            _skip_connect_entries(log)
        tcp.access_log_options.flush_access_log_on_connected = True
    tcp.access_log.extend(log for log in loggers if log is not None)
