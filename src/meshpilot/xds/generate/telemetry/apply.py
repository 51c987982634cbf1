"""Put access logs and tracing into a proxy's generated listeners.

Runs after the listener generators (their output is cached and shared by the proxies of a
class; telemetry depends on the workload's labels, so it is added to copies here). Every
HCM gets the loggers and tracing of its direction, every tcp_proxy the loggers, every
listener the NR-only listener logger, as istiod places them. The direction of a sidecar
listener is its traffic_direction (INBOUND: SERVER, else CLIENT); gateways are CLIENT.
Chains that only drop traffic (BlackHoleCluster, the inbound loop blackhole) get nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.extensions.request_id.uuid.v3 import uuid_pb2

from meshpilot.model.indexes.telemetry import Mode, telemetry_index
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.telemetry.access_log import AccessLogs, access_logs
from meshpilot.xds.generate.telemetry.tracing import HcmTracing, hcm_tracing
from meshpilot.xds.names import BLACKHOLE_CLUSTER, VIRTUAL_INBOUND_BLACKHOLE
from meshpilot.xds.protos import Filters, boolean, pack

__all__ = ["DirectionTelemetry", "apply_telemetry", "direction_telemetry"]


@dataclass(frozen=True, slots=True)
class DirectionTelemetry:
    logs: AccessLogs
    tracing: HcmTracing

    @property
    def empty(self) -> bool:
        return (
            self.logs.empty
            and self.tracing.tracing is None
            and self.tracing.use_request_id_for_trace_sampling
        )


def direction_telemetry(push: PushContext, proxy: Proxy, mode: Mode) -> DirectionTelemetry:
    index = telemetry_index(push)
    logging = index.access_logging(proxy.namespace, proxy.labels, mode)
    tracing = index.tracing(proxy.namespace, proxy.labels, mode)
    return DirectionTelemetry(access_logs(logging, push.mesh), hcm_tracing(push, proxy, tracing))


def _hcm(config: hcm_pb2.HttpConnectionManager, telemetry: DirectionTelemetry) -> None:
    config.access_log.extend(telemetry.logs.filters)
    traced = telemetry.tracing
    if traced.tracing is not None:
        config.tracing.CopyFrom(traced.tracing)
    if not traced.use_request_id_for_trace_sampling:
        config.request_id_extension.typed_config.CopyFrom(
            pack(uuid_pb2.UuidRequestIdConfig(use_request_id_for_trace_sampling=boolean(False)))
        )


def _chain(chain: lc_pb2.FilterChain, telemetry: DirectionTelemetry) -> None:
    if chain.name == VIRTUAL_INBOUND_BLACKHOLE:
        return
    for item in chain.filters:
        if item.name == Filters.HCM:
            hcm = hcm_pb2.HttpConnectionManager()
            item.typed_config.Unpack(hcm)
            _hcm(hcm, telemetry)
            item.typed_config.CopyFrom(pack(hcm))
        elif item.name == Filters.TCP_PROXY and telemetry.logs.filters:
            tcp = tcp_proxy_pb2.TcpProxy()
            item.typed_config.Unpack(tcp)
            if tcp.cluster == BLACKHOLE_CLUSTER:
                continue
            tcp.access_log.extend(telemetry.logs.filters)
            item.typed_config.CopyFrom(pack(tcp))


def _decorated(
    listener: listener_pb2.Listener, telemetry: DirectionTelemetry
) -> listener_pb2.Listener:
    out = listener_pb2.Listener()
    out.CopyFrom(listener)
    out.access_log.extend(telemetry.logs.listener)
    for chain in out.filter_chains:
        _chain(chain, telemetry)
    if out.HasField("default_filter_chain"):
        _chain(out.default_filter_chain, telemetry)
    return out


def apply_telemetry(
    push: PushContext, proxy: Proxy, listeners: list[listener_pb2.Listener]
) -> list[listener_pb2.Listener]:
    """`listeners` with the proxy's access logs and tracing (copies; the input is kept)."""
    by_mode: dict[Mode, DirectionTelemetry] = {}
    out = []
    for listener in listeners:
        inbound = proxy.type is ProxyType.SIDECAR and listener.traffic_direction == base_pb2.INBOUND
        mode = Mode.SERVER if inbound else Mode.CLIENT
        telemetry = by_mode.get(mode)
        if telemetry is None:
            telemetry = by_mode[mode] = direction_telemetry(push, proxy, mode)
        out.append(listener if telemetry.empty else _decorated(listener, telemetry))
    return out
