"""HttpConnectionManager for sidecar listeners, with the defaults istiod sets.

Istio's buildHTTPConnectionManager: codec AUTO, no remote-address trust, websocket upgrades,
no stream idle timeout, path normalization on (mesh pathNormalization DEFAULT) with escaped
slashes kept, 100-continue proxied, the UUID request-id extension. Istio-only pieces
(istio.metadata_exchange, istio.stats, istio.alpn) are left out: stock Envoy rejects them.
"""

from __future__ import annotations

from envoy.config.core.v3 import protocol_pb2
from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.request_id.uuid.v3 import uuid_pb2

from meshpilot.xds.generate.http_filters import inbound_http_filters, outbound_http_filters
from meshpilot.xds.generate.listeners.filters import network_filter
from meshpilot.xds.protos import Filters, ads_source, boolean, duration, pack

__all__ = ["hcm_filter", "inbound_hcm", "outbound_hcm"]

HCM = hcm_pb2.HttpConnectionManager
# Inbound answers carry `server: istio-envoy`; outbound keeps Envoy's default (Istio quirk).
INBOUND_SERVER_NAME = "istio-envoy"


def _base(stat_prefix: str) -> hcm_pb2.HttpConnectionManager:
    return HCM(
        codec_type=HCM.AUTO,
        stat_prefix=stat_prefix,
        use_remote_address=boolean(False),
        normalize_path=boolean(True),
        path_with_escaped_slashes_action=HCM.KEEP_UNCHANGED,
        upgrade_configs=[HCM.UpgradeConfig(upgrade_type="websocket")],
        stream_idle_timeout=duration(0),
        proxy_100_continue=True,
        request_id_extension=hcm_pb2.RequestIDExtension(
            typed_config=pack(
                uuid_pb2.UuidRequestIdConfig(use_request_id_for_trace_sampling=boolean(True))
            )
        ),
    )


def outbound_hcm(stat_prefix: str, route_config_name: str) -> hcm_pb2.HttpConnectionManager:
    """Sidecar outbound: routes come by RDS over ADS, named after the port (or host:port)."""
    hcm = _base(stat_prefix)
    hcm.rds.CopyFrom(hcm_pb2.Rds(config_source=ads_source(), route_config_name=route_config_name))
    hcm.http_filters.extend(outbound_http_filters())
    return hcm


def inbound_hcm(
    stat_prefix: str, route_config: route_pb2.RouteConfiguration, http2: bool
) -> hcm_pb2.HttpConnectionManager:
    """Sidecar inbound: an inline route config; client certificate details are forwarded
    to the app (APPEND_FORWARD, subject/URI/DNS), as Istio's defaults do."""
    hcm = _base(stat_prefix)
    hcm.route_config.CopyFrom(route_config)
    hcm.server_name = INBOUND_SERVER_NAME
    hcm.forward_client_cert_details = HCM.APPEND_FORWARD
    hcm.set_current_client_cert_details.CopyFrom(
        HCM.SetCurrentClientCertDetails(subject=boolean(True), uri=True, dns=True)
    )
    if http2:
        # Declared HTTP/2 and gRPC ports: Istio sets empty HTTP/2 options (grpc-web needs it).
        hcm.http2_protocol_options.CopyFrom(protocol_pb2.Http2ProtocolOptions())
    hcm.http_filters.extend(inbound_http_filters())
    return hcm


def hcm_filter(hcm: hcm_pb2.HttpConnectionManager) -> lc_pb2.Filter:
    return network_filter(Filters.HCM, hcm)
