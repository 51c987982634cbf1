"""Put access logs and tracing into a proxy's generated listeners.

Runs after the listener generators (their output is cached and shared by the proxies of a
class; telemetry depends on the workload's labels, so it is added to copies here). Every
HCM gets the loggers and tracing of its direction, every tcp_proxy the loggers, every
listener the NR-only listener logger, as istiod places them. The direction of a sidecar
listener is its traffic_direction (INBOUND: SERVER, else CLIENT); gateways are CLIENT.
Chains that only drop traffic (BlackHoleCluster, the inbound loop blackhole) get nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.extensions.request_id.uuid.v3 import uuid_pb2

from meshpilot.model.indexes.telemetry import MetricsChoice, Mode, telemetry_index
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Service
from meshpilot.xds.generate.telemetry.access_log import AccessLogs, access_logs
from meshpilot.xds.generate.telemetry.metrics import (
    Workload,
    metrics_filters,
    metrics_logger,
    workload_of,
)
from meshpilot.xds.generate.telemetry.metrics_tcp import add_tcp_metrics
from meshpilot.xds.generate.telemetry.tracing import HcmTracing, hcm_tracing
from meshpilot.xds.names import BLACKHOLE_CLUSTER, VIRTUAL_INBOUND_BLACKHOLE
from meshpilot.xds.protos import Filters, boolean, pack

__all__ = ["DirectionTelemetry", "apply_telemetry", "direction_telemetry"]


@dataclass(frozen=True, slots=True)
class DirectionTelemetry:
    logs: AccessLogs
    tracing: HcmTracing
    metrics: MetricsChoice | None = None

    @property
    def empty(self) -> bool:
        return (
            self.logs.empty
            and self.tracing.tracing is None
            and self.tracing.use_request_id_for_trace_sampling
            and self.metrics is None
        )


def direction_telemetry(push: PushContext, proxy: Proxy, mode: Mode) -> DirectionTelemetry:
    index = telemetry_index(push)
    logging = index.access_logging(proxy.namespace, proxy.labels, mode)
    tracing = index.tracing(proxy.namespace, proxy.labels, mode)
    metrics = index.metrics(proxy.namespace, proxy.labels, mode)
    return DirectionTelemetry(
        access_logs(logging, push.mesh), hcm_tracing(push, proxy, tracing), metrics
    )


@dataclass(frozen=True, slots=True)
class _Metrics:
    """What the standard metrics of one proxy need to know besides the direction."""

    push: PushContext
    proxy: Proxy
    services: Mapping[int, Service]  # inbound: the service each workload port serves

    def own(self, mode: Mode, port: int) -> Workload:
        """This proxy's facts; a server's include the service its port serves."""
        return workload_of(self.proxy, self.services.get(port) if mode is Mode.SERVER else None)

    @property
    def principal(self) -> str:
        td = self.push.mesh.trust_domain
        return f"spiffe://{td}/ns/{self.proxy.namespace}/sa/{self.proxy.service_account}"


def _security(chain: lc_pb2.FilterChain, mode: Mode) -> str:
    """connection_security_policy: inbound TLS chains are mutual TLS (the sidecar requires
    the client certificate); a client does not know (Istio says unknown)."""
    if mode is Mode.CLIENT:
        return "unknown"
    return "mutual_tls" if chain.HasField("transport_socket") else "none"


def _services(push: PushContext, proxy: Proxy) -> dict[int, Service]:
    out: dict[int, Service] = {}
    for svc, endpoint in sorted(push.service_targets(proxy), key=lambda t: t[0].hostname):
        out.setdefault(endpoint.port, svc)
    return out


def _with_metrics(
    config: hcm_pb2.HttpConnectionManager, chain: lc_pb2.FilterChain, where: _Where
) -> None:
    """The peer exchange filters before the router, the stats logger among the loggers."""
    choice = where.telemetry.metrics
    assert choice is not None
    mode, port = where.mode, chain.filter_chain_match.destination_port.value
    own = where.metrics.own(mode, port)
    logger = metrics_logger(own, where.metrics.principal, mode, _security(chain, mode), choice)
    if logger is None:
        return
    filters = list(config.http_filters)
    del config.http_filters[:]
    config.http_filters.extend([*filters[:-1], *metrics_filters(own, mode), *filters[-1:]])
    config.access_log.append(logger)


def _hcm(config: hcm_pb2.HttpConnectionManager, chain: lc_pb2.FilterChain, where: _Where) -> None:
    telemetry = where.telemetry
    config.access_log.extend(telemetry.logs.filters)
    if telemetry.metrics is not None:
        _with_metrics(config, chain, where)
    traced = telemetry.tracing
    if traced.tracing is not None:
        config.tracing.CopyFrom(traced.tracing)
    if not traced.use_request_id_for_trace_sampling:
        config.request_id_extension.typed_config.CopyFrom(
            pack(uuid_pb2.UuidRequestIdConfig(use_request_id_for_trace_sampling=boolean(False)))
        )


@dataclass(frozen=True, slots=True)
class _Where:
    mode: Mode
    telemetry: DirectionTelemetry
    metrics: _Metrics


def _chain(chain: lc_pb2.FilterChain, where: _Where) -> None:
    telemetry = where.telemetry
    if chain.name == VIRTUAL_INBOUND_BLACKHOLE:
        return
    for item in chain.filters:
        if item.name == Filters.HCM:
            hcm = hcm_pb2.HttpConnectionManager()
            item.typed_config.Unpack(hcm)
            _hcm(hcm, chain, where)
            item.typed_config.CopyFrom(pack(hcm))
        elif item.name == Filters.TCP_PROXY and (telemetry.logs.filters or telemetry.metrics):
            tcp = tcp_proxy_pb2.TcpProxy()
            item.typed_config.Unpack(tcp)
            if tcp.cluster == BLACKHOLE_CLUSTER:
                continue
            tcp.access_log.extend(telemetry.logs.filters)
            if telemetry.metrics is not None:
                _tcp_metrics(tcp, chain, where, telemetry.metrics)
            item.typed_config.CopyFrom(pack(tcp))


def _tcp_metrics(
    tcp: tcp_proxy_pb2.TcpProxy, chain: lc_pb2.FilterChain, where: _Where, choice: MetricsChoice
) -> None:
    mode, port = where.mode, chain.filter_chain_match.destination_port.value
    own, principal = where.metrics.own(mode, port), where.metrics.principal
    suffix = where.metrics.push.domain_suffix
    add_tcp_metrics(tcp, own, principal, mode, _security(chain, mode), choice, suffix)


def _decorated(listener: listener_pb2.Listener, where: _Where) -> listener_pb2.Listener:
    out = listener_pb2.Listener()
    out.CopyFrom(listener)
    out.access_log.extend(where.telemetry.logs.listener)
    for chain in out.filter_chains:
        _chain(chain, where)
    if out.HasField("default_filter_chain"):
        _chain(out.default_filter_chain, where)
    return out


def apply_telemetry(
    push: PushContext, proxy: Proxy, listeners: list[listener_pb2.Listener]
) -> list[listener_pb2.Listener]:
    """`listeners` with the proxy's access logs and tracing (copies; the input is kept)."""
    by_mode: dict[Mode, DirectionTelemetry] = {}
    metrics: _Metrics | None = None
    out = []
    for listener in listeners:
        inbound = proxy.type is ProxyType.SIDECAR and listener.traffic_direction == base_pb2.INBOUND
        mode = Mode.SERVER if inbound else Mode.CLIENT
        telemetry = by_mode.get(mode)
        if telemetry is None:
            telemetry = by_mode[mode] = direction_telemetry(push, proxy, mode)
        if telemetry.empty:
            out.append(listener)
            continue
        if metrics is None:
            services = _services(push, proxy) if telemetry.metrics is not None else {}
            metrics = _Metrics(push, proxy, services)
        out.append(_decorated(listener, _Where(mode, telemetry, metrics)))
    return out
